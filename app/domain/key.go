package domain

import "context"

type keyNameKey struct{}

// WithKeyName returns ctx carrying the name of the credential that
// authenticated the request: the API key's name, for the API and the
// console, or "db:" and the PostgreSQL user for the command line, which
// authenticates to the database rather than with a key. Operator actions
// (rollbacks and their resumes, campaign ends, alert acknowledgements,
// adjustments, pauses and resumes) record it beside the operator the
// caller claims, so a claimed name can always be checked against who
// could make the claim.
func WithKeyName(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, keyNameKey{}, name)
}

// KeyName returns the credential's name ctx carries (see WithKeyName), or
// nil when there is none: a plain SQL job, or the service acting on its
// own (reconciliation, a campaign ending on time).
func KeyName(ctx context.Context) *string {
	if name, ok := ctx.Value(keyNameKey{}).(string); ok && name != "" {
		return &name
	}
	return nil
}
