package redisx

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// DefaultKeyPrefix is the prefix of every key a Limiter writes unless
// WithKeyPrefix says otherwise.
const DefaultKeyPrefix = "ratewarden:"

// unsharded is the shard number of a limit that is not split.
const unsharded = -1

// seqSuffix ends the key of a sliding window log's sequence counter.
const seqSuffix = ":seq"

// keySpace builds the Redis keys of every limit under one prefix:
//
//	<prefix>{<identity>}<suffix>          a limit that is not split
//	<prefix>{<identity>#<shard>}<suffix>  shard i of a split limit
//
// where identity is algorithms.Identity of the limit. The hash tag holds the
// identity and the shard, so all keys of one limit (and shard) live in one
// Redis Cluster slot, and different shards of a hot limit spread over the
// cluster. The mapping is injective: the prefix holds no brace and the
// identity holds none, so the first '{' and the first '}' delimit the tag; an
// identity always ends in ":<window seconds>", so a trailing "#<digits>" can
// only be a shard.
type keySpace struct {
	prefix string
}

// newKeySpace returns the key space under prefix, which must not contain a
// brace (it would move or break the hash tag).
func newKeySpace(prefix string) (keySpace, error) {
	if strings.ContainsAny(prefix, "{}") {
		return keySpace{}, fmt.Errorf("redisx: key prefix %q must not contain '{' or '}'", prefix)
	}
	return keySpace{prefix: prefix}, nil
}

// tag returns the hash tag of the state that l keeps for k in shard
// (unsharded, or a shard number ≥ 0), braces included.
func (s keySpace) tag(k algorithms.Key, l algorithms.Limit, shard int) string {
	id := algorithms.Identity(k, l)
	var b strings.Builder
	b.Grow(len(id) + 16)
	b.WriteByte('{')
	b.WriteString(id)
	if shard != unsharded {
		b.WriteByte('#')
		b.WriteString(strconv.Itoa(shard))
	}
	b.WriteByte('}')
	return b.String()
}

// keys returns the KEYS of l's script for k in shard: the state key, and for
// a sliding window log also its sequence counter.
func (s keySpace) keys(k algorithms.Key, l algorithms.Limit, shard int) []string {
	base := s.prefix + s.tag(k, l, shard)
	if l.Algorithm == algorithms.SlidingWindowLog {
		return []string{base, base + seqSuffix}
	}
	return []string{base}
}
