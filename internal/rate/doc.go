// Package rate is the vocabulary of the request path: the Limiter interface
// that the backends (internal/memory, internal/redisx) and every layer
// between them and the service implement, the operations they apply (Op,
// with its Kind: take, charge, refund or settle) on the state a limit keeps
// for a descriptor (Key, Identity), and what becomes of a call that fails
// (Failure, Outcome). The maths the operations apply, and the Result they
// answer, are package algorithms'; Apply applies an Op to an algorithm's
// State.
package rate
