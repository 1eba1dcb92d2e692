package rlqs

import (
	"testing"

	"github.com/ratewarden/ratewarden/internal/testkit/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }
