// Package dashboard serves a web dashboard over the table of an outbox
// store (github.com/outbox-go/outbox/jdbcstore): the backlog per status,
// the lag, recent throughput and failures, the blocked ordering keys, the
// DEAD events with filters and paging, one event in full, the replay of
// DEAD events (one, selected, or by filter, after a dry-run preview and
// a confirmation) and a purge preview, on SQLite, MySQL/MariaDB or
// PostgreSQL, for one database or a set of tenant databases.
//
// [New] returns an [http.Handler] to mount in the application's own
// server under Config.BasePath; `outboxctl serve` runs the same handler
// standalone. Pages are rendered on the server with html/template, their
// assets are embedded (no CDN: the pages work offline) and every read
// view works without JavaScript. The replay preview of a full page of
// selected DEAD events is a GET whose query takes up to about 220 KB (500
// ids of up to 36 characters, URL-escaped): a server with
// [http.Server.MaxHeaderBytes] below 256 KiB refuses it (net/http's
// default, 1 MiB, is enough).
//
// # Security
//
// The dashboard is read-only unless Config.AllowMutations is set. Every
// mutation is a POST that must carry the CSRF token of the page it came
// from (a signed double-submit cookie) and pass a cross-origin check
// ([http.CrossOriginProtection]: when the request carries a
// Sec-Fetch-Site or Origin header, as every browser sends, it must name the
// dashboard's own origin or one of Config.TrustedOrigins; a request with
// neither, which no browser sends (curl, a script), passes that check and
// still needs the token). The dashboard authenticates nobody: put the
// application's authentication in front of it with Config.Middleware (or
// by wrapping the returned handler), and serve it on a private address.
//
// A private address alone does not keep web pages out: through DNS
// rebinding a page an operator visits (http://attacker.example:8080, its
// name then rebound to 127.0.0.1) makes same-origin requests to a
// dashboard on loopback or a private network, which the cross-origin
// check and the CSRF token let through; it reads the dead letters and,
// with mutations enabled, replays them. Only the Host header names the
// attacker's host: a dashboard without authentication in front must set
// Config.AllowedHosts to the names and addresses it is reached by, and
// requests for any other host are refused (421 Misdirected Request)
// before anything else. `outboxctl serve` sets it by default.
//
// Payloads and header values may hold personal data: they are shown only
// with Config.ShowPayloads. Every input is bounded and validated, every
// output escaped, and the database is only reached through the store's
// own parameterized queries.
package dashboard
