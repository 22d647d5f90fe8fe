// Command outboxctl is the operator's tool for the table of an outbox store
// (github.com/outbox-go/outbox/jdbcstore): it reports the backlog and the
// blocked ordering keys, lists, shows, replays and discards DEAD events,
// purges old rows and prints or applies the schema, on SQLite,
// MySQL/MariaDB or PostgreSQL.
//
//	outboxctl [global flags] <command> [flags] [args]
//
//	outboxctl --dsn app.db stats
//	outboxctl --dsn 'app:secret@tcp(db:3306)/shop' --table outbox_event dead list --type OrderPlaced --limit 20
//	outboxctl --dsn app.db dead show 01J9Z3M4X8F2V6Q7R1T5W0Y3K2
//	outboxctl --dsn app.db dead replay --type PaymentRequested --dry-run
//	outboxctl --dsn app.db dead discard --id 01J9Z3M4X8F2V6Q7R1T5W0Y3K2
//	outboxctl --dsn app.db purge --done-older-than 7d --dead-older-than 30d
//	outboxctl --dsn 'postgres://app:secret@db:5432/shop?sslmode=disable' stats
//	outboxctl schema print --dialect mysql --table shop_outbox
//	outboxctl --dsn app.db serve --addr 127.0.0.1:8080
//
// Commands: stats, dead list, dead show ID, dead replay, dead discard, purge, serve,
// schema print, schema apply, help. Every command takes --help.
//
// Global flags go before or after the command: --dsn (a SQLite file, or a
// go-sql-driver/mysql DSN such as user:pass@tcp(host:3306)/db, optionally
// prefixed mysql://, or a PostgreSQL URL postgres://user:pass@host:5432/db;
// default $OUTBOX_DSN), --table (default outbox_event),
// --timeout (default 10s, bounds the whole command, connecting included;
// serve, which runs until interrupted, only its connecting) and --json
// (machine-readable output instead of aligned tables).
//
// A SQLite file must exist, except for schema apply, so a typo never
// creates an empty database. JDBC URLs and PostgreSQL key=value strings
// are refused (bad usage), not taken for a file. The password of a DSN is
// never printed.
//
// Exit status: 0 on success; 1 when the command failed (database
// unreachable, event not found, a statement failed), with one line on
// stderr; 2 on bad usage (unknown command or flag, bad value, missing
// selector), also with one line on stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/go-sql-driver/mysql"
)

// progName prefixes every message.
const progName = "outboxctl"

// Exit statuses.
const (
	exitOK      = 0
	exitFailed  = 1
	exitUsage   = 2
	envDSN      = "OUTBOX_DSN"
	helpCommand = "help"
)

func main() {
	// The MySQL driver logs some connection problems itself, on stderr;
	// outboxctl reports every failure as its own single line instead.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// command is one node of the command tree: a leaf with an action, or a
// group (dead, schema) with subcommands.
type command struct {
	name    string // last word, e.g. "list"
	path    string // full name, e.g. "dead list"; set by commandTree
	args    string // synopsis of the positional arguments, e.g. "ID"
	nargs   int    // exact number of positional arguments
	summary string // one line for the command list
	help    string // paragraphs for the command's --help
	// define registers the command's own flags on fs and returns the
	// action reading them. nil for groups.
	define func(fs *flag.FlagSet) action
	subs   []*command
	// untimed commands run until interrupted (serve): --timeout bounds
	// only what they say, not the whole run.
	untimed bool
}

// action runs a command with its positional arguments, after every flag
// was parsed. It returns a *usageError for bad usage.
type action func(ctx context.Context, s *session, args []string) error

// commandTree returns every command, with paths filled in.
func commandTree() []*command {
	tree := []*command{
		statsCommand(),
		{
			name:    "dead",
			summary: "inspect, replay and discard DEAD events",
			help:    "DEAD events failed every delivery attempt and wait for an operator.",
			subs:    []*command{deadListCommand(), deadShowCommand(), deadReplayCommand(), deadDiscardCommand()},
		},
		purgeCommand(),
		serveCommand(),
		{
			name:    "schema",
			summary: "print or apply the outbox table's DDL",
			help:    "The DDL is the store's own (jdbcstore SchemaSQL/ApplySchema) for the dialect and --table.",
			subs:    []*command{schemaPrintCommand(), schemaApplyCommand()},
		},
	}
	var fill func(prefix string, cmds []*command)
	fill = func(prefix string, cmds []*command) {
		for _, c := range cmds {
			c.path = prefix + c.name
			fill(c.path+" ", c.subs)
		}
	}
	fill("", tree)
	return tree
}

// find returns the command named name among cmds, or nil.
func find(cmds []*command, name string) *command {
	for _, c := range cmds {
		if c.name == name {
			return c
		}
	}
	return nil
}

// run is the whole program: it parses args, runs the command and returns
// the exit status. Results go to stdout, the one-line error to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	g := newGlobals(os.Getenv(envDSN))
	root := quietFlagSet(progName)
	g.register(root)
	tree := commandTree()
	if err := root.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printRootUsage(stdout, tree)
			return exitOK
		}
		return report(stderr, g, nil, &usageError{msg: err.Error()})
	}
	rest := root.Args()
	if len(rest) == 0 {
		return report(stderr, g, nil, &usageError{msg: "missing command"})
	}
	if rest[0] == helpCommand {
		return runHelp(stdout, stderr, g, tree, rest[1:])
	}
	cmd, rest, err := resolve(tree, rest)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printCommandUsage(stdout, cmd)
			return exitOK
		}
		return report(stderr, g, cmd, err)
	}
	own := quietFlagSet(cmd.path)
	act := cmd.define(own)
	fs := quietFlagSet(cmd.path)
	own.VisitAll(func(f *flag.Flag) { fs.Var(f.Value, f.Name, f.Usage) })
	root.VisitAll(func(f *flag.Flag) { fs.Var(f.Value, f.Name, f.Usage) })
	pos, err := parseInterspersed(fs, rest)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printCommandUsage(stdout, cmd)
			return exitOK
		}
		return report(stderr, g, cmd, &usageError{msg: err.Error()})
	}
	if err := checkArgs(cmd, pos); err != nil {
		return report(stderr, g, cmd, err)
	}
	if g.timeout <= 0 {
		return report(stderr, g, cmd, usagef("--timeout must be positive, got %s", g.timeout))
	}
	signals := ctx // ends on SIGINT or SIGTERM
	if !cmd.untimed {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.timeout)
		defer cancel()
	}
	s := &session{stdout: stdout, stderr: stderr, g: g}
	defer s.close()
	err = act(ctx, s, pos)
	if err != nil && signals.Err() != nil && errors.Is(err, context.Canceled) {
		err = fmt.Errorf("%w (interrupted before it finished)", err)
	}
	return report(stderr, g, cmd, err)
}

// resolve walks the command tree along args. It returns the leaf command
// and the arguments after its name. A group followed by --help returns
// the group and flag.ErrHelp.
func resolve(tree []*command, args []string) (*command, []string, error) {
	cmds := tree
	var parent *command
	for i, a := range args {
		c := find(cmds, a)
		if c == nil {
			if parent != nil && isHelpFlag(a) {
				return parent, nil, flag.ErrHelp
			}
			if parent == nil {
				return nil, nil, usagef("unknown command %q", a)
			}
			if strings.HasPrefix(a, "-") {
				return parent, nil, usagef("flag %s before the subcommand: write %s %s <%s> [flags]",
					a, progName, parent.path, strings.ReplaceAll(strings.ReplaceAll(names(parent.subs), " or ", "|"), ", ", "|"))
			}
			return parent, nil, usagef("unknown subcommand %q: want %s", a, names(parent.subs))
		}
		if len(c.subs) == 0 {
			return c, args[i+1:], nil
		}
		parent, cmds = c, c.subs
	}
	return parent, nil, usagef("missing subcommand: want %s", names(parent.subs))
}

// runHelp is "outboxctl help [command...]". "help --help" and
// "help help" print help's own usage.
func runHelp(stdout, stderr io.Writer, g *globals, tree []*command, args []string) int {
	if len(args) == 0 {
		printRootUsage(stdout, tree)
		return exitOK
	}
	if args[0] == helpCommand || isHelpFlag(args[0]) {
		if len(args) > 2 || (len(args) == 2 && !isHelpFlag(args[1])) {
			return report(stderr, g, nil, usagef("help: unexpected argument %q", args[len(args)-1]))
		}
		printHelpUsage(stdout)
		return exitOK
	}
	if n := len(args); n > 1 && isHelpFlag(args[n-1]) {
		args = args[:n-1] // "help stats --help" is "help stats"
	}
	cmd, rest, err := resolve(tree, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil && cmd != nil && len(args) == 1:
		// "help dead": the group itself.
	case err != nil:
		return report(stderr, g, nil, err)
	case len(rest) > 0:
		return report(stderr, g, nil, usagef("help: unexpected argument %q", rest[0]))
	}
	printCommandUsage(stdout, cmd)
	return exitOK
}

func isHelpFlag(a string) bool { return a == "-h" || a == "--h" || a == "-help" || a == "--help" }

// names lists the names of cmds as "a, b or c".
func names(cmds []*command) string {
	var b strings.Builder
	for i, c := range cmds {
		switch {
		case i == 0:
		case i == len(cmds)-1:
			b.WriteString(" or ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(c.name)
	}
	return b.String()
}

// checkArgs checks the number of positional arguments of cmd.
func checkArgs(cmd *command, pos []string) error {
	switch {
	case len(pos) > cmd.nargs:
		return usagef("unexpected argument %q", pos[cmd.nargs])
	case len(pos) < cmd.nargs:
		return usagef("missing argument %s", cmd.args)
	}
	return nil
}

// usageError is bad usage: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// report prints err, if any, as one line on stderr and returns the exit
// status. A MySQL or PostgreSQL password in the message is masked.
func report(stderr io.Writer, g *globals, cmd *command, err error) int {
	if err == nil {
		return exitOK
	}
	code := exitFailed
	// The message is scrubbed before this function's own words are added:
	// a password that is a word of them (the command's name, "help")
	// would otherwise be masked there too.
	msg := scrubSecret(err.Error(), g.dsn.raw)
	var ue *usageError
	if errors.As(err, &ue) {
		code = exitUsage
		where := progName
		if cmd != nil {
			where += " " + cmd.path
		}
		msg = scrubSecret(ue.msg, g.dsn.raw) + " (see '" + where + " --help')"
		if cmd != nil {
			msg = cmd.path + ": " + msg
		}
	} else if errors.Is(err, context.DeadlineExceeded) {
		msg += fmt.Sprintf(" (the --timeout of %s ran out)", g.timeout)
	}
	fmt.Fprintln(stderr, progName+": "+oneLine(msg))
	return code
}
