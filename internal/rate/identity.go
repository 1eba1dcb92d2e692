package rate

import (
	"github.com/ratewarden/ratewarden/internal/algorithms"

	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// MaxIdentityPart is the longest domain, key or value kept verbatim in an
// identity; a longer one is replaced by its SHA-256 digest.
const MaxIdentityPart = 256

// Identity returns the canonical name of the state that limit l keeps for
// k: an injective encoding of the domain, the entries, the algorithm and the
// window. The limit's numbers (requests, burst) are not part of it, so a
// changed limit keeps counting where the old one stopped.
//
// The encoding is domain|key=value|…|algorithm:seconds, followed by
// ":calendar" for a calendar limit, with '%', '|', '=',
// ':', '{', '}' and control bytes percent-escaped, so the result never holds a
// brace (it can sit inside a Redis hash tag) and no two inputs share an
// identity. A part longer than MaxIdentityPart bytes becomes "%#" and the hex
// SHA-256 of the part: "%#" never appears in an escaped part, so a digest
// cannot collide with a literal value, and a long value cannot dodge its limit.
func Identity(k Key, l algorithms.Limit) string {
	var b strings.Builder
	n := len(k.Domain) + len(l.Algorithm.String()) + 22
	for _, e := range k.Entries {
		n += len(e.Key) + len(e.Value) + 2
	}
	b.Grow(n)
	writePart(&b, k.Domain)
	for _, e := range k.Entries {
		b.WriteByte('|')
		writePart(&b, e.Key)
		b.WriteByte('=')
		writePart(&b, e.Value)
	}
	b.WriteByte('|')
	b.WriteString(l.Algorithm.String())
	b.WriteByte(':')
	var digits [20]byte
	b.Write(strconv.AppendInt(digits[:0], int64(l.Window/time.Second), 10))
	if l.Calendar {
		b.WriteString(":calendar")
	}
	return b.String()
}

// writePart writes s escaped, or its digest when it is too long.
func writePart(b *strings.Builder, s string) {
	if len(s) > MaxIdentityPart {
		sum := sha256.Sum256([]byte(s))
		b.WriteString("%#")
		b.WriteString(hex.EncodeToString(sum[:]))
		return
	}
	const hexDigits = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f || c == '%' || c == '|' || c == '=' || c == ':' || c == '{' || c == '}' {
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&0xf])
			continue
		}
		b.WriteByte(c)
	}
}
