package workload

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// A figure is one number a command prints about itself (sysbench's events
// per second, pgbench's tps), taken from its output by a JSON path or a
// regular expression. Both are checked when the plan is read; what a run
// printed is checked per execution.

// jsonStep is one step of a JSON path: a key of an object or an index of
// an array.
type jsonStep struct {
	key   string
	index int
	isKey bool
}

// jsonPath is a parsed path such as .results[0].tps or .["a.b"][2].
type jsonPath struct {
	text  string
	steps []jsonStep
}

// parseJSONPath reads jq's simple paths: "." is the whole document, .key
// (letters, digits, _ and -), ["any key"] and [N] (N ≥ 0) in any sequence.
func parseJSONPath(s string) (jsonPath, error) {
	p := jsonPath{text: s}
	if !strings.HasPrefix(s, ".") {
		return p, errors.New(`a JSON path starts with "." (e.g. .results[0].tps)`)
	}
	rest := s[1:]
	first := true
	for rest != "" {
		switch {
		case rest[0] == '[':
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return p, fmt.Errorf("%q: unclosed [", s)
			}
			inner := rest[1:end]
			if strings.HasPrefix(inner, `"`) {
				// A quoted key may hold "]": find the closing quote first.
				k, tail, err := quotedKey(rest[1:])
				if err != nil {
					return p, fmt.Errorf("%q: %v", s, err)
				}
				if !strings.HasPrefix(tail, "]") {
					return p, fmt.Errorf("%q: want ] after the quoted key %q", s, k)
				}
				p.steps = append(p.steps, jsonStep{key: k, isKey: true})
				rest = tail[1:]
				break
			}
			n, err := strconv.Atoi(inner)
			if err != nil || n < 0 {
				return p, fmt.Errorf("%q: [%s] is not an index (a whole number ≥ 0) or a quoted key", s, inner)
			}
			p.steps = append(p.steps, jsonStep{index: n})
			rest = rest[end+1:]
		case rest[0] == '.' || first:
			if rest[0] == '.' {
				rest = rest[1:]
			}
			n := 0
			for n < len(rest) && (isKeyByte(rest[n])) {
				n++
			}
			if n == 0 {
				return p, fmt.Errorf("%q: want a key after \".\" (quote other keys: .[\"a key\"])", s)
			}
			p.steps = append(p.steps, jsonStep{key: rest[:n], isKey: true})
			rest = rest[n:]
		default:
			return p, fmt.Errorf("%q: unexpected %q (want .key, [N] or [\"key\"])", s, rest[:1])
		}
		first = false
	}
	return p, nil
}

func isKeyByte(c byte) bool {
	return c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// quotedKey reads a JSON string at the start of s and returns it and what
// follows.
func quotedKey(s string) (string, string, error) {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			var k string
			if err := json.Unmarshal([]byte(s[:i+1]), &k); err != nil {
				return "", "", fmt.Errorf("bad quoted key %s: %v", s[:i+1], err)
			}
			return k, s[i+1:], nil
		}
	}
	return "", "", errors.New("unclosed quoted key")
}

// lookup follows the path through a decoded document (json.Number for
// numbers) and returns the number at its end. A string holding a number
// counts (some tools quote theirs).
func (p jsonPath) lookup(doc any) (float64, error) {
	cur := doc
	var at strings.Builder // the path walked so far
	where := func() string {
		if at.Len() == 0 {
			return "."
		}
		return at.String()
	}
	for _, st := range p.steps {
		if st.isKey {
			obj, ok := cur.(map[string]any)
			if !ok {
				return 0, fmt.Errorf("%s is %s, not an object with key %q", where(), jsonKind(cur), st.key)
			}
			v, ok := obj[st.key]
			if !ok {
				return 0, fmt.Errorf("%s has no key %q (it has %s)", where(), st.key, keysOf(obj))
			}
			cur = v
			if strings.IndexFunc(st.key, func(r rune) bool { return r > 127 || !isKeyByte(byte(r)) }) < 0 {
				at.WriteString("." + st.key)
			} else {
				at.WriteString("[" + strconv.Quote(st.key) + "]")
			}
			continue
		}
		arr, ok := cur.([]any)
		if !ok {
			return 0, fmt.Errorf("%s is %s, not an array", where(), jsonKind(cur))
		}
		if st.index >= len(arr) {
			return 0, fmt.Errorf("%s has %d elements, no [%d]", where(), len(arr), st.index)
		}
		cur = arr[st.index]
		at.WriteString("[" + strconv.Itoa(st.index) + "]")
	}
	switch x := cur.(type) {
	case json.Number:
		return x.Float64()
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil {
			return 0, fmt.Errorf("%s is the string %q, not a number", p.text, x)
		}
		return f, nil
	}
	return 0, fmt.Errorf("%s is %s, not a number", p.text, jsonKind(cur))
}

func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return "a number"
}

func keysOf(m map[string]any) string {
	var ks []string
	for k := range m {
		ks = append(ks, strconv.Quote(k))
	}
	if len(ks) == 0 {
		return "no keys"
	}
	sort.Strings(ks)
	if len(ks) > 8 {
		ks = append(ks[:8], "…")
	}
	return strings.Join(ks, ", ")
}

// decodeJSONOutput decodes the JSON document a command printed. Text
// before it (a banner, a progress line) is skipped: the document starts at
// the first line that begins with { or [. Text after it is ignored.
func decodeJSONOutput(out []byte) (any, error) {
	start := -1
	for i := 0; i < len(out); {
		j := i
		for j < len(out) && (out[j] == ' ' || out[j] == '\t') {
			j++
		}
		if j < len(out) && (out[j] == '{' || out[j] == '[') {
			start = j
			break
		}
		nl := bytes.IndexByte(out[i:], '\n')
		if nl < 0 {
			break
		}
		i += nl + 1
	}
	if start < 0 {
		return nil, errors.New("no JSON document (no line starts with { or [)")
	}
	dec := json.NewDecoder(bytes.NewReader(out[start:]))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	return doc, nil
}

// figureRegexp compiles a figure's pattern and returns the index of the
// group that holds the number: the group named value, or the only group.
func figureRegexp(s string) (*regexp.Regexp, int, error) {
	re, err := regexp.Compile(s)
	if err != nil {
		return nil, 0, err
	}
	if i := re.SubexpIndex("value"); i > 0 {
		return re, i, nil
	}
	if re.NumSubexp() == 1 {
		return re, 1, nil
	}
	return nil, 0, fmt.Errorf("the pattern has %d groups; mark the number with (?P<value>…)", re.NumSubexp())
}

// matchFigure takes the number from the last match of re in out: a
// command's summary comes after its progress lines.
func matchFigure(re *regexp.Regexp, group int, out []byte) (float64, error) {
	all := re.FindAllSubmatch(out, -1)
	if len(all) == 0 {
		return 0, errors.New("the pattern matched nothing")
	}
	m := all[len(all)-1]
	text := strings.TrimSpace(string(m[group]))
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return 0, fmt.Errorf("the pattern matched, but its value %q is not a number", text)
	}
	return f, nil
}

// outputTail is the end of a command's output for a message: at most its
// last lines and bytes, with "…" when cut.
func outputTail(b []byte) string {
	const maxLines, maxBytes = 12, 1500
	s := strings.TrimRight(string(b), "\n\r\t ")
	if s == "" {
		return "(empty)"
	}
	cut := false
	if lines := strings.Split(s, "\n"); len(lines) > maxLines {
		s = strings.Join(lines[len(lines)-maxLines:], "\n")
		cut = true
	}
	if len(s) > maxBytes {
		s = s[len(s)-maxBytes:]
		cut = true
	}
	if cut {
		s = "…" + s
	}
	return s
}
