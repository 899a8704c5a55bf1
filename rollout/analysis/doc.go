// Package analysis judges a rollout wave by metrics: a PromQL query per
// check, run against a Prometheus server, whose value must satisfy the
// check's condition.
//
// A check is what a template declares (policy.AnalysisCheck: package
// templates parses and vets it, its condition included); a query may name
// the rollout's kind, revision and wave as {{kind}}, {{revision}} and
// {{wave}}, replaced by their values escaped for a PromQL string. Evaluate runs one check and returns a Result that is
// Passed, Failed (the value, the condition and, for a vector, the series
// that broke it) or Held: the server did not answer, refused the query,
// or returned no data. A held check never promotes: missing data is not
// success. Credentials (a bearer token or a user and password) are sent
// to the server and appear in no Result, error or log.
//
// It does not decide what a failed check does to a rollout (package
// rollout rolls the revision back, as for a failed health gate) nor when
// checks run (during each wave's soak). Of ours it imports templates only.
package analysis
