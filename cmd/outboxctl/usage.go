package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// printRootUsage prints "outboxctl --help".
func printRootUsage(w io.Writer, tree []*command) {
	fmt.Fprintf(w, `%[1]s inspects and repairs the table of an outbox store (SQLite, MySQL/MariaDB or PostgreSQL).

Usage:
  %[1]s [global flags] <command> [flags] [args]

Commands:
`, progName)
	tw := newTable(w)
	var list func(cmds []*command)
	list = func(cmds []*command) {
		for _, c := range cmds {
			if len(c.subs) > 0 {
				list(c.subs)
				continue
			}
			fmt.Fprintf(tw, "  %s\t%s\n", strings.TrimSpace(c.path+" "+c.args), c.summary)
		}
	}
	list(tree)
	fmt.Fprintf(tw, "  %s\t%s\n", "help [command]", "show a command's flags and details")
	tw.Flush()
	fmt.Fprintf(w, `
Global flags (before or after the command; one or two dashes):
%s
Examples:
  %[2]s --dsn app.db stats
  %[2]s --dsn 'app:secret@tcp(db:3306)/shop' dead list --type OrderPlaced
  %[2]s --dsn app.db dead replay --type PaymentRequested --dry-run
  %[2]s --dsn app.db purge --done-older-than 7d --dead-older-than 30d
  %[2]s --dsn app.db serve --addr 127.0.0.1:8080

Exit status: 0 success; 1 failure (database unreachable, event not found, a statement
failed); 2 bad usage. Errors are one line on stderr.
`, globalDefaults(), progName)
}

// printCommandUsage prints "outboxctl <command> --help".
func printCommandUsage(w io.Writer, c *command) {
	if len(c.subs) > 0 {
		fmt.Fprintf(w, "Usage: %s [global flags] %s <subcommand> [flags]\n\n%s\n\nSubcommands:\n", progName, c.path, c.help)
		tw := newTable(w)
		for _, sc := range c.subs {
			fmt.Fprintf(tw, "  %s\t%s\n", strings.TrimSpace(sc.name+" "+sc.args), sc.summary)
		}
		tw.Flush()
		fmt.Fprintf(w, "\nRun '%s %s <subcommand> --help' for its flags.\n", progName, c.path)
		return
	}
	own := flag.NewFlagSet(c.path, flag.ContinueOnError)
	c.define(own)
	synopsis := c.path
	hasFlags := false
	own.VisitAll(func(*flag.Flag) { hasFlags = true })
	if hasFlags {
		synopsis += " [flags]"
	}
	if c.args != "" {
		synopsis += " " + c.args
	}
	fmt.Fprintf(w, "Usage: %s [global flags] %s\n\n%s\n", progName, synopsis, strings.TrimSpace(c.help))
	if hasFlags {
		fmt.Fprintf(w, "\nFlags:\n")
		own.SetOutput(w)
		own.PrintDefaults()
	}
	fmt.Fprintf(w, "\nGlobal flags (before or after the command):\n%s", globalDefaults())
}

// printHelpUsage prints "outboxctl help --help".
func printHelpUsage(w io.Writer) {
	fmt.Fprintf(w, `Usage: %[1]s help [command]

Shows the usage of a command, its flags and details, as '%[1]s <command> --help'
does ('%[1]s help dead replay' is '%[1]s dead replay --help'); without a command,
the list of commands ('%[1]s --help').
`, progName)
}

// globalDefaults renders the global flags with their defaults.
func globalDefaults() string {
	var b strings.Builder
	fs := flag.NewFlagSet(progName, flag.ContinueOnError)
	newGlobals(os.Getenv(envDSN)).register(fs)
	fs.SetOutput(&b)
	fs.PrintDefaults()
	return b.String()
}
