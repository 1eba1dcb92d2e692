// Package exactness is a black-box referee of a rate limiter: it records
// what the server answered, each answer between the moment just before its
// request was sent and the moment just after the answer came (Call,
// Recorder), with the events that are not calls (a reload that changes a
// limit, Redis losing its state), and holds the whole history to the rules
// of the limit's algorithm, with the Go twins of internal/algorithms as the
// model:
//
//   - CheckAdmitted: no hit past the limit. It counts, per interval, only
//     the admitted calls wholly inside it, so it is a lower bound on what
//     the server admitted there: timing noise can hide an excess, never
//     invent one.
//   - CheckDenials: no false denial. A denial is false only when, placing
//     the other calls where it suits the server most, the model still had
//     room at every moment the server could have decided it.
//   - CheckRemaining: limit_remaining lies between the model's least and
//     most remaining over those moments, and never rises between two calls
//     of one caller by more than the model's could.
//
// Each check returns Violations with what is needed to debug them. How far
// a history may stray from the model (timing noise, the lag of a lease,
// other replicas' leases) is a Tolerance, never a guess inside a check.
//
// A History is judged after the fact: nothing here is safe for concurrent
// use but the Recorder.
package exactness
