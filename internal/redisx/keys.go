package redisx

import (
	"fmt"
	"strconv"
	"strings"
)

// keySpace builds the Redis keys of every limit under one prefix:
//
//	<prefix>{<identity>}<suffix>          a limit that is not split
//	<prefix>{<identity>#<shard>}<suffix>  shard i of a split limit
//
// where identity is algorithms.Identity of the limit and the suffixes are
// those its algorithm's script takes (algorithms.Spec.Keys). The hash tag
// holds the identity and the shard, so all keys of one limit (and shard)
// live in one Redis Cluster slot, and different shards of a hot limit spread
// over the cluster. The mapping is injective: the prefix holds no brace and
// the identity holds none, so the first '{' and the first '}' delimit the
// tag; an identity always ends in ":<window seconds>", so a trailing
// "#<digits>" can only be a shard.
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

// appendKeys appends to dst the number of keys, then the keys of the state
// of the limit of identity id in shard (Unsharded, or a shard number ≥ 0),
// one per suffix: a script's numkeys and KEYS. The keys are parts of one
// string: the last key alone when each suffix starts with the one before
// (as the log's "" and ":seq" do), else all the keys one after the other.
func (s keySpace) appendKeys(dst []any, id string, shard int, suffixes []string) []any {
	var digits [20]byte
	var tagShard []byte
	if shard != Unsharded {
		tagShard = strconv.AppendInt(append(digits[:0], '#'), int64(shard), 10)
	}
	base := len(s.prefix) + 1 + len(id) + len(tagShard) + 1
	nested := true
	for i := 1; i < len(suffixes); i++ {
		nested = nested && strings.HasPrefix(suffixes[i], suffixes[i-1])
	}
	written := suffixes
	if nested {
		written = suffixes[len(suffixes)-1:]
	}
	size := 0
	for _, suffix := range written {
		size += base + len(suffix)
	}
	var b strings.Builder
	b.Grow(size)
	for _, suffix := range written {
		b.WriteString(s.prefix)
		b.WriteByte('{')
		b.WriteString(id)
		b.Write(tagShard)
		b.WriteByte('}')
		b.WriteString(suffix)
	}
	all := b.String()
	dst = append(dst, len(suffixes))
	for _, suffix := range suffixes {
		n := base + len(suffix)
		dst = append(dst, all[:n])
		if !nested {
			all = all[n:]
		}
	}
	return dst
}
