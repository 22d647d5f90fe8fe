package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
)

// csrfCookie holds the browser's random nonce; csrfField carries the
// token (the nonce's HMAC) in forms.
const (
	csrfCookie = "outbox_dashboard_csrf"
	csrfField  = "csrf"
	nonceLen   = 16
)

// csrf is a signed double-submit token: the cookie holds a random nonce,
// every form the HMAC of it under a server secret. A POST passes when its
// form token is the HMAC of its cookie's nonce, which a page of another
// origin can neither read nor forge (nor can a cookie planted by a
// sibling subdomain, without the secret).
type csrf struct {
	secret []byte
	path   string
}

// token returns the form token for r, setting a fresh nonce cookie on w
// when r has none (or a malformed one).
func (c csrf) token(w http.ResponseWriter, r *http.Request) string {
	if ck, err := r.Cookie(csrfCookie); err == nil {
		if nonce, err := base64.RawURLEncoding.DecodeString(ck.Value); err == nil && len(nonce) == nonceLen {
			return c.sign(nonce)
		}
	}
	nonce := make([]byte, nonceLen)
	_, _ = rand.Read(nonce)
	http.SetCookie(w, &http.Cookie{
		Name: csrfCookie, Value: base64.RawURLEncoding.EncodeToString(nonce), Path: c.path,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
	return c.sign(nonce)
}

func (c csrf) sign(nonce []byte) string {
	m := hmac.New(sha256.New, c.secret)
	m.Write([]byte("outbox-dashboard-csrf-v1:"))
	m.Write(nonce)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// valid reports whether the parsed form of r carries the token of its
// cookie.
func (c csrf) valid(r *http.Request) bool {
	ck, err := r.Cookie(csrfCookie)
	if err != nil {
		return false
	}
	nonce, err := base64.RawURLEncoding.DecodeString(ck.Value)
	if err != nil || len(nonce) != nonceLen {
		return false
	}
	got := r.PostForm.Get(csrfField)
	return got != "" && hmac.Equal([]byte(got), []byte(c.sign(nonce)))
}
