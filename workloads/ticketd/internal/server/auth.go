package server

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Iterations turns a --hash-cost (log2, like bcrypt's cost) into PBKDF2
// iterations. PBKDF2 from the standard library keeps the binary free of
// extra modules; the cost knob behaves like bcrypt's: +1 doubles a login.
func Iterations(cost int) int { return 1 << cost }

// HashPassword derives the stored hash of a password.
func HashPassword(password string, salt []byte, iterations int) ([]byte, error) {
	h, err := pbkdf2.Key(sha256.New, password, salt, iterations, 32)
	if err != nil {
		return nil, fmt.Errorf("pbkdf2 with %d iterations: %w", iterations, err)
	}
	return h, nil
}

// CheckPassword verifies a password in constant time.
func CheckPassword(password string, salt, want []byte, iterations int) bool {
	got, err := HashPassword(password, salt, iterations)
	if err != nil {
		return false
	}
	return subtle.ConstantTimeCompare(got, want) == 1
}

// NewSalt returns 16 random bytes.
func NewSalt() ([]byte, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("random salt: %w", err)
	}
	return b, nil
}

// signer makes and checks the two signed values ticketd hands out: the
// anti-forgery token of a form and the session cookie. Sessions are signed
// cookies (like Rails' cookie store, which Redmine used) so a login costs
// the hash check, not a session write.
type signer struct{ key []byte }

func newSigner() (*signer, error) {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("random signing key: %w", err)
	}
	return &signer{key: k}, nil
}

func (s *signer) mac(parts ...string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(strings.Join(parts, "|")))
	return hex.EncodeToString(m.Sum(nil))
}

// nonce is a random value for the pre-login cookie the login form's token
// is bound to.
func nonce() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random nonce: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// formToken binds a form to a cookie value (nonce before login, session
// after), so a client must keep cookies and extract the token from the page.
func (s *signer) formToken(bound string) string { return s.mac("form", bound) }

func (s *signer) checkFormToken(bound, token string) bool {
	if bound == "" || token == "" {
		return false
	}
	return hmac.Equal([]byte(s.formToken(bound)), []byte(token))
}

// session is "uid.expiryUnix.mac".
func (s *signer) session(uid int64, expires time.Time) string {
	id := strconv.FormatInt(uid, 10)
	exp := strconv.FormatInt(expires.Unix(), 10)
	return id + "." + exp + "." + s.mac("session", id, exp)
}

func (s *signer) checkSession(v string, now time.Time) (int64, bool) {
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return 0, false
	}
	if !hmac.Equal([]byte(s.mac("session", parts[0], parts[1])), []byte(parts[2])) {
		return 0, false
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || now.Unix() > exp {
		return 0, false
	}
	uid, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil {
		return 0, false
	}
	return uid, true
}
