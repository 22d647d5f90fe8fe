package main

import (
	"net"
	"strings"
	"testing"
)

// serve --db NAME=DSN says what serve --dsn DSN says of a database that
// does not answer within --timeout, the password masked in both: the
// error keeps its cause, so the hint that --timeout ran out is there too.
func TestServeDBKeepsTheTimeoutHint(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // accepts connections and never answers
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	dsn := "root:s3cr3t-pw@tcp(" + ln.Addr().String() + ")/x"
	const hint = " (the --timeout of 300ms ran out)"
	viaDSN := fails(t, exitFailed, "--timeout", "300ms", "serve", "--addr", "127.0.0.1:0", "--dsn", dsn)
	viaDB := fails(t, exitFailed, "--timeout", "300ms", "serve", "--addr", "127.0.0.1:0", "--db", "eu="+dsn)
	for _, line := range []string{viaDSN, viaDB} {
		if !strings.HasSuffix(line, hint) || strings.Contains(line, "s3cr3t") {
			t.Errorf("%q: want the hint %q and no password", line, hint)
		}
	}
	if want := strings.Replace(viaDSN, "outboxctl: ", "outboxctl: --db eu: ", 1); viaDB != want {
		t.Errorf("serve --db says\n%s\nserve --dsn\n%s", viaDB, viaDSN)
	}
}
