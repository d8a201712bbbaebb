package reconcile

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/stockhold/stockhold/app/db"
)

// bundleActionText is what a bundle_vs_components finding says became of
// the hold.
const bundleActionText = "left as it is for a person: no pool paused, no stock moved (the pools' own counters are checked " +
	"against the lines apart); compare the lines with the definition in the details and find who changed them"

// recordBundles records one high-risk finding per bundle line of a hold
// whose component lines are out of step with the definition it used
// (rows: BundleLinesMismatch's, in hold and bundle order), each in a
// transaction of its own.
func (s *Service) recordBundles(ctx context.Context, runID int64, rows []db.BundleLinesMismatchRow) error {
	for i := 0; i < len(rows); {
		j := i + 1
		for j < len(rows) && rows[j].ReservationID == rows[i].ReservationID && rows[j].BundleSku == rows[i].BundleSku {
			j++
		}
		f := bundleFinding(rows[i:j])
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			return addFinding(ctx, db.New(tx), runID, ClassHighRisk, KindBundleVsComponents, f, bundleActionText)
		})
		if err != nil {
			return fmt.Errorf("record bundle line %s of hold %s: %w", rows[i].BundleSku, rows[i].ReservationID, err)
		}
		i = j
	}
	return nil
}

// bundleFinding is the finding on one hold's bundle line: the bundle, its
// quantity and definition version (the least each, when the lines do not
// agree on them: lines_agree false), and per component what the
// definition wants and what the lines hold (a SKU the definition does not
// have wants 0; a component no line holds is held 0).
func bundleFinding(rows []db.BundleLinesMismatchRow) finding {
	first := rows[0]
	components := make([]map[string]any, len(rows))
	for i, r := range rows {
		components[i] = map[string]any{"sku": r.Sku, "definition": r.Wanted, "held": r.Held, "difference": r.Held - r.Wanted}
	}
	return finding{sku: first.BundleSku, reservationID: first.ReservationID, details: map[string]any{
		"bundle_sku": first.BundleSku, "bundle_quantity": first.BundleQuantity, "bundle_version": first.BundleVersion,
		"lines_agree": first.Agree, "components": components,
	}}
}
