package rls

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

// ErrNotRequestJSON is wrapped by the error of ParseRequestJSON for a body
// that is not a RateLimitRequest in JSON.
var ErrNotRequestJSON = errors.New("rls: request is not a RateLimitRequest in JSON")

// ParseRequestJSON reads body, a RateLimitRequest in JSON (protojson's
// mapping), as the server's /json and /explain and the check command's
// -explain take it. Its error wraps ErrNotRequestJSON and says what is
// wrong, and where.
func ParseRequestJSON(body []byte) (*rlsv3.RateLimitRequest, error) {
	var req rlsv3.RateLimitRequest
	if err := loneSurrogate(body); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotRequestJSON, err)
	}
	if err := protojson.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotRequestJSON, err)
	}
	return &req, nil
}

// loneSurrogate returns an error naming the first \u escape in the JSON text
// body that stands for half a UTF-16 surrogate pair (a high surrogate not
// followed by the escape of a low one, or a low surrogate on its own), and
// where it is, or nil when there is none. A protobuf string must be valid
// UTF-8, which no such half can be encoded in; protojson refuses it too, but
// its error quotes the text after the escape, or says the input ended.
// Text outside strings is not looked at: protojson reports what is wrong
// there.
func loneSurrogate(body []byte) error {
	inString := false
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case c == '"':
			inString = !inString
		case c == '\\' && inString:
			r, ok := hexEscape(body[i:])
			if !ok {
				i++ // an escape of one character, or an invalid one
				continue
			}
			if utf16.IsSurrogate(r) {
				if low, ok := hexEscape(body[i+6:]); r < 0xdc00 && ok && low >= 0xdc00 && low <= 0xdfff {
					i += 11 // a pair
					continue
				}
				line, col := position(body, i)
				return fmt.Errorf(`line %d:%d: invalid escape "%s" in string: half a UTF-16 surrogate pair, which a UTF-8 string cannot hold`, line, col, body[i:i+6])
			}
			i += 5
		}
	}
	return nil
}

// hexEscape returns the code unit of the \uXXXX escape that b starts with,
// and false when it starts with no such escape.
func hexEscape(b []byte) (rune, bool) {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return 0, false
	}
	var r rune
	for _, c := range b[2:6] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// position returns the line and column, both from 1 and the column in
// characters, of byte offset i of text.
func position(text []byte, i int) (line, col int) {
	before := text[:i]
	start := bytes.LastIndexByte(before, '\n') + 1
	return bytes.Count(before, []byte{'\n'}) + 1, utf8.RuneCount(before[start:]) + 1
}
