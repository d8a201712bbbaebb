package db

// The text of the expiry loop's reads of due holds and of the event
// feed's page, for the plan test (plan_test.go) to explain as PostgreSQL
// runs them.
const (
	ReservationsDueSQL    = reservationsDue
	ReservationsChangeSQL = reservationsChange
	ReservationsDueOnSQL  = reservationsDueOn
	EventRowsAfterSQL     = eventRowsAfter
)
