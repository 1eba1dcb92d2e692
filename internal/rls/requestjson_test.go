package rls

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseRequestJSONLoneSurrogate: a \u escape of half a UTF-16
// surrogate pair, which no UTF-8 string can hold, is refused with an error
// that quotes that escape and says where it is, whatever follows it.
func TestParseRequestJSONLoneSurrogate(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"a high surrogate ending the string", `{"domain":"\ud800"}`, `line 1:12: invalid escape "\ud800" in string: half a UTF-16 surrogate pair`},
		{"a high surrogate followed by text", `{"domain":"test","descriptors":[{"entries":[{"key":"k","value":"\ud800x"}]}]}`, `line 1:65: invalid escape "\ud800" in string: half a UTF-16 surrogate pair`},
		{"a high surrogate followed by another escape", `{"domain":"a\uD800\n"}`, `line 1:13: invalid escape "\uD800" in string`},
		{"a high surrogate followed by a high surrogate", `{"domain":"\ud800\ud800"}`, `line 1:12: invalid escape "\ud800" in string`},
		{"a lone low surrogate", "{\n  \"domain\": \"\\udc00\"\n}", `line 2:14: invalid escape "\udc00" in string: half a UTF-16 surrogate pair`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRequestJSON([]byte(tc.body))
			require.ErrorIs(t, err, ErrNotRequestJSON)
			assert.ErrorContains(t, err, tc.want)
		})
	}

	t.Run("a pair and an escaped backslash are no surrogates", func(t *testing.T) {
		req, err := ParseRequestJSON([]byte(`{"domain":"test","descriptors":[{"entries":[{"key":"k","value":"\ud83d\ude00 \\ud800"}]}]}`))
		require.NoError(t, err)
		assert.Equal(t, "\U0001F600 \\ud800", req.GetDescriptors()[0].GetEntries()[0].GetValue())
	})
	_, err := ParseRequestJSON([]byte(`{`))
	assert.ErrorIs(t, err, ErrNotRequestJSON, "what protojson refuses")
}
