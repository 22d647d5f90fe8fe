// Package browsertest drives the dashboard (package
// github.com/outbox-go/outbox/dashboard) in a real headless Chromium with
// chromedp, against SQLite and, when OUTBOX_TEST_MYSQL_DSN and
// OUTBOX_TEST_POSTGRES_DSN are set, MariaDB/MySQL and PostgreSQL. It is
// its own module so that the core module takes no browser dependency.
//
// The tests find Chromium at $CHROMIUM_PATH or /usr/bin/chromium; without
// it they skip, except with CI=true, where they fail. With
// OUTBOX_SCREENSHOT_DIR set they save their screenshots there (the
// README's are made so: OUTBOX_SCREENSHOT_DIR=$PWD/docs/screenshots).
package browsertest
