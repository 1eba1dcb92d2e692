package rlqsenvoy

import (
	"time"

	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// AllowAll is the blanket rule ALLOW_ALL.
func AllowAll() *typev3.RateLimitStrategy {
	return blanket(typev3.RateLimitStrategy_ALLOW_ALL)
}

// DenyAll is the blanket rule DENY_ALL.
func DenyAll() *typev3.RateLimitStrategy {
	return blanket(typev3.RateLimitStrategy_DENY_ALL)
}

func blanket(r typev3.RateLimitStrategy_BlanketRule) *typev3.RateLimitStrategy {
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: r}}
}

// TokenBucket is a token_bucket strategy: maxTokens tokens at most,
// perFill more every fill.
func TokenBucket(maxTokens, perFill uint32, fill time.Duration) *typev3.RateLimitStrategy {
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_TokenBucket{TokenBucket: &typev3.TokenBucket{
		MaxTokens:     maxTokens,
		TokensPerFill: wrapperspb.UInt32(perFill),
		FillInterval:  durationpb.New(fill),
	}}}
}
