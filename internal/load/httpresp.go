package load

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"strconv"
)

// response is what a step needs from an HTTP/1.x response. It is parsed by
// hand rather than by http.ReadResponse, whose header map and textproto
// machinery were a fifth of the generator's CPU per request in profiles
// against nginx; only the headers that change what the client does are
// kept.
type response struct {
	StatusCode int
	Close      bool // the server will close the connection after this response
	Location   string
	SetCookies []string
	Body       []byte // only when asked to keep it
}

// Cookies parses the Set-Cookie headers; malformed ones are skipped, as a
// browser would.
func (r *response) Cookies() []*http.Cookie {
	var cs []*http.Cookie
	for _, line := range r.SetCookies {
		if c, err := http.ParseSetCookie(line); err == nil {
			cs = append(cs, c)
		}
	}
	return cs
}

const maxKeptBody = 16 << 20

// readResponse reads one complete response (skipping 1xx interim ones) from
// br into r. keepBody keeps the body (for extraction); otherwise it is
// discarded as it is read.
func readResponse(br *bufio.Reader, method string, keepBody bool, r *response) error {
	for {
		*r = response{SetCookies: r.SetCookies[:0], Body: r.Body[:0]}
		line, err := readHTTPLine(br)
		if err != nil {
			return err
		}
		code, http10, err := parseStatusLine(line)
		if err != nil {
			return err
		}
		r.StatusCode = code
		r.Close = http10
		length := int64(-1)
		chunked := false
		for {
			h, err := readHTTPLine(br)
			if err != nil {
				return err
			}
			if len(h) == 0 {
				break
			}
			if err := r.header(h, http10, &length, &chunked); err != nil {
				return err
			}
		}
		if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
			continue // interim response; the real one follows
		}
		switch {
		case hasNoBody(method, code):
			return nil
		case chunked:
			if err := r.readBody(httputil.NewChunkedReader(br), keepBody); err != nil {
				return err
			}
			// Trailers (usually none) end with an empty line.
			for {
				t, err := readHTTPLine(br)
				if err != nil {
					return err
				}
				if len(t) == 0 {
					return nil
				}
			}
		case length >= 0:
			if !keepBody {
				_, err := br.Discard(int(length))
				return err
			}
			return r.readBody(io.LimitReader(br, length), true)
		default:
			// No length: the body runs until the server closes.
			r.Close = true
			return r.readBody(br, keepBody)
		}
	}
}

// parseStatusLine reads "HTTP/1.1 200 OK".
func parseStatusLine(line []byte) (code int, http10 bool, err error) {
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return 0, false, &protocolError{kind: KindProtocol, msg: "bad HTTP status line " + quote(line)}
	}
	if c, ok := digits(line[9:12]); ok {
		code = int(c)
	} else if code, err = strconv.Atoi(string(line[9:12])); err != nil {
		code = 0
	}
	if code < 100 {
		return 0, false, &protocolError{kind: KindProtocol, msg: "bad HTTP status in " + quote(line)}
	}
	return code, line[7] == '0', nil
}

// digits reads b when it is 1 to 18 ASCII digits and nothing else: the
// common case of a status or a length, without strconv's generality (a
// sign, underscores, a string to make). Anything else is for strconv.
func digits(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// trimOWS drops the spaces and tabs around a header value (RFC 9110's
// optional whitespace).
func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// header applies one header line (without its line end) to r and to the
// body framing: the length (-1 when none) and whether the body is chunked.
//
// Most lines of a response are none of the five names it looks for (nginx
// sends eight headers, two of which count), so a name is told apart by its
// length before any byte is compared, and a value trimmed only when it
// counts. With bytes.EqualFold, which folds Unicode and so cannot rule a
// name out by its length, and a TrimSpace of every value, the event loop
// ran 8 500 instructions per request against nginx; 5 400 with the names
// compared by length first (callgrind, 2026-11-28). The usual values (a
// length of digits, "keep-alive", "close") are read without strconv or a
// search; anything else takes the general path, so what is accepted is
// unchanged.
func (r *response) header(h []byte, http10 bool, length *int64, chunked *bool) error {
	i := bytes.IndexByte(h, ':')
	if i < 0 {
		return &protocolError{kind: KindProtocol, msg: "bad header line " + quote(h)}
	}
	name, value := h[:i], h[i+1:]
	switch len(name) {
	case len("Content-Length"):
		if !equalFoldASCII(name, "Content-Length") {
			return nil
		}
		if n, ok := digits(trimOWS(value)); ok {
			*length = n
			return nil
		}
		value = bytes.TrimSpace(value)
		n, err := strconv.ParseInt(string(value), 10, 64)
		if err != nil || n < 0 {
			return &protocolError{kind: KindProtocol, msg: "bad Content-Length " + quote(value)}
		}
		*length = n
	case len("Transfer-Encoding"):
		if equalFoldASCII(name, "Transfer-Encoding") {
			*chunked = containsFold(value, "chunked")
		}
	case len("Connection"): // and Set-Cookie
		switch {
		case equalFoldASCII(name, "Connection"):
			switch v := trimOWS(value); {
			case equalFoldASCII(v, "keep-alive"):
				if http10 {
					r.Close = false
				}
			case equalFoldASCII(v, "close") || containsFold(value, "close"):
				r.Close = true
			case http10 && containsFold(value, "keep-alive"):
				r.Close = false
			}
		case equalFoldASCII(name, "Set-Cookie"):
			r.SetCookies = append(r.SetCookies, string(bytes.TrimSpace(value)))
		}
	case len("Location"):
		if equalFoldASCII(name, "Location") {
			r.Location = string(bytes.TrimSpace(value))
		}
	}
	return nil
}

// equalFoldASCII reports whether b is name with its ASCII letters in any
// case. A header name is a token (RFC 9110, 5.1): ASCII, compared without
// case and nothing more, so "Tranſfer-Encoding" (U+017F, which Unicode
// folds to s) names no header of ours, as it names none for net/http.
func equalFoldASCII(b []byte, name string) bool {
	if len(b) != len(name) {
		return false
	}
	for i := 0; i < len(b); i++ {
		if c, d := b[i], name[i]; c != d && lowerASCII(c) != lowerASCII(d) {
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + ('a' - 'A')
	}
	return c
}

// hasNoBody reports whether a response to method with this status carries no body.
func hasNoBody(method string, code int) bool {
	return method == http.MethodHead || code == http.StatusNoContent || code == http.StatusNotModified || code < 200
}

func (r *response) readBody(src io.Reader, keep bool) error {
	if !keep {
		_, err := io.Copy(io.Discard, src)
		return err
	}
	var buf bytes.Buffer
	buf.Write(r.Body)
	_, err := buf.ReadFrom(io.LimitReader(src, maxKeptBody))
	r.Body = buf.Bytes()
	if err == nil {
		// Whatever lies beyond the kept part still has to leave the connection.
		_, err = io.Copy(io.Discard, src)
	}
	return err
}

// readHTTPLine returns one line without its \r\n (or bare \n).
func readHTTPLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		return nil, &protocolError{kind: KindProtocol, msg: fmt.Sprintf("header line longer than %d bytes", br.Size())}
	}
	if err != nil {
		if err == io.EOF && len(line) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// containsFold reports whether s contains the lower-case ASCII word, in
// any case, without allocating (bytes.ToLower did, once per response).
func containsFold(s []byte, word string) bool {
	for i := 0; i+len(word) <= len(s); i++ {
		if equalFoldASCII(s[i:i+len(word)], word) {
			return true
		}
	}
	return false
}
