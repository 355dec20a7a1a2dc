package load

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
)

// respParser reads an HTTP/1.x response from bytes as they arrive, for the
// event loops that cannot block in a bufio.Reader (see evloop.go). It keeps
// the same things readResponse does (status, Connection, Location,
// Set-Cookie) and never keeps the body: the event loops serve steps that
// extract nothing.
type respParser struct {
	method string
	resp   response
	state  parseState
	left   int64 // body or chunk bytes still to come
	seen   int64 // bytes consumed by this response (status line to the end)
}

type parseState int

const (
	psHead       parseState = iota
	psBody                  // left bytes of a Content-Length body
	psChunkSize             // a chunk-size line
	psChunkData             // left bytes of a chunk
	psChunkEnd              // the CRLF after a chunk
	psTrailer               // trailer lines up to the empty one
	psUntilClose            // a body without length: everything until EOF
	psDone
)

// maxHeadBytes bounds a response head (and a chunk line) as readResponse's
// 16 KiB bufio.Reader does.
const maxHeadBytes = 16 << 10

func (p *respParser) reset(method string) {
	p.method = method
	p.resp = response{SetCookies: p.resp.SetCookies[:0]}
	p.state, p.left, p.seen = psHead, 0, 0
}

func (p *respParser) done() bool { return p.state == psDone }

// feed consumes what it can of b and returns how many bytes it used. When
// the response is complete it stops there (done reports true): the bytes
// after it belong to no request.
func (p *respParser) feed(b []byte) (int, error) {
	n := 0
	for n < len(b) && p.state != psDone {
		m, err := p.step(b[n:])
		n += m
		p.seen += int64(m)
		if err != nil {
			return n, err
		}
		if m == 0 {
			break // needs more bytes
		}
	}
	return n, nil
}

// step consumes one element (a head, a body piece, a chunk line ...); 0
// with no error means that it needs more bytes.
func (p *respParser) step(b []byte) (int, error) {
	switch p.state {
	case psHead:
		return p.head(b)
	case psBody, psChunkData:
		m := int64(len(b))
		if m > p.left {
			m = p.left
		}
		p.left -= m
		if p.left == 0 {
			if p.state == psBody {
				p.state = psDone
			} else {
				p.state = psChunkEnd
			}
		}
		return int(m), nil
	case psChunkSize, psChunkEnd, psTrailer:
		line, m, err := nextLine(b)
		if m == 0 || err != nil {
			return 0, err
		}
		switch p.state {
		case psChunkSize:
			if i := bytes.IndexByte(line, ';'); i >= 0 {
				line = line[:i] // chunk extensions
			}
			size, err := strconv.ParseInt(string(bytes.TrimSpace(line)), 16, 64)
			if err != nil || size < 0 {
				return m, &protocolError{kind: KindProtocol, msg: "bad chunk size line " + quote(line)}
			}
			if size == 0 {
				p.state = psTrailer
			} else {
				p.state, p.left = psChunkData, size
			}
		case psChunkEnd:
			if len(line) != 0 {
				return m, &protocolError{kind: KindProtocol, msg: "chunk not followed by CRLF: " + quote(line)}
			}
			p.state = psChunkSize
		case psTrailer:
			if len(line) == 0 {
				p.state = psDone
			}
		}
		return m, nil
	case psUntilClose:
		return len(b), nil
	}
	return 0, nil
}

// nextLine returns the line at the start of b without its \r\n (or bare
// \n) and the bytes it spans; 0 when b holds no whole line yet.
func nextLine(b []byte) (line []byte, n int, err error) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		if len(b) >= maxHeadBytes {
			return nil, 0, &protocolError{kind: KindProtocol, msg: "line longer than 16 KiB"}
		}
		return nil, 0, nil
	}
	line = b[:i]
	if k := len(line); k > 0 && line[k-1] == '\r' {
		line = line[:k-1]
	}
	return line, i + 1, nil
}

// head parses a response head once all of it is in b, in one pass: each
// line is found once and applied as it is found. Finding the blank line
// first and then each line again (nginx's head is ten lines) was two
// thirds of the event loop's instructions per request against nginx; with
// one pass, and digits read without strconv (httpresp.go), the loop runs
// 3 950 instructions per request instead of 5 800 (callgrind of `ctrperf
// load --ops`, 30 000 less 10 000 requests, 2026-11-29). The response is built
// afresh on each call, so a head that arrives in pieces is read again from
// its start once more of it is there; a line that is wrong is an error as
// soon as it is whole, as readResponse reports it.
func (p *respParser) head(b []byte) (int, error) {
	p.resp = response{SetCookies: p.resp.SetCookies[:0]}
	length, chunked, http10 := int64(-1), false, false
	for off := 0; ; {
		i := bytes.IndexByte(b[off:], '\n')
		if i < 0 {
			if len(b) >= maxHeadBytes {
				return 0, &protocolError{kind: KindProtocol, msg: "response head longer than 16 KiB"}
			}
			return 0, nil
		}
		line := b[off : off+i]
		if k := len(line); k > 0 && line[k-1] == '\r' {
			line = line[:k-1]
		}
		first := off == 0
		off += i + 1
		if off > maxHeadBytes {
			return 0, &protocolError{kind: KindProtocol, msg: "response head longer than 16 KiB"}
		}
		switch {
		case first && len(line) == 0:
			return off, &protocolError{kind: KindProtocol, msg: "empty line instead of an HTTP status line"}
		case first:
			code, h10, err := parseStatusLine(line)
			if err != nil {
				return off, err
			}
			p.resp.StatusCode, p.resp.Close, http10 = code, h10, h10
		case len(line) == 0:
			p.framing(length, chunked)
			return off, nil
		default:
			if err := p.resp.header(line, http10, &length, &chunked); err != nil {
				return off, err
			}
		}
	}
}

// framing sets what follows a complete head.
func (p *respParser) framing(length int64, chunked bool) {
	code := p.resp.StatusCode
	switch {
	case code >= 100 && code < 200 && code != http.StatusSwitchingProtocols:
		// An interim response: the real one follows.
	case hasNoBody(p.method, code):
		p.state = psDone
	case chunked:
		p.state = psChunkSize
	case length == 0:
		p.state = psDone
	case length > 0:
		p.state, p.left = psBody, length
	default:
		p.resp.Close = true
		p.state = psUntilClose
	}
}

// eof tells the parser that the server closed the connection, with
// unparsed bytes still buffered: that ends a body without length; anywhere
// else the response is cut short (io.EOF when nothing of it came).
func (p *respParser) eof(unparsed int) error {
	switch {
	case p.state == psUntilClose:
		p.state = psDone
		return nil
	case p.state == psHead && p.seen == 0 && unparsed == 0:
		return io.EOF
	}
	return io.ErrUnexpectedEOF
}
