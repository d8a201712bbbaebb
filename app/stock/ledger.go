package stock

// LedgerKind is what a ledger row records of its stock row: a typed kind,
// as River types a job's state (rivertype.JobState). The ledger's CHECK
// ledger_kind allows exactly these (TestLedgerKindsMatchTheCheck).
type LedgerKind string

// The ledger's kinds.
const (
	// Stock from outside and operators' changes of it.
	LedgerStockIn LedgerKind = "stock_in"
	LedgerAdjust  LedgerKind = "adjust"
	LedgerMove    LedgerKind = "move"
	LedgerLoss    LedgerKind = "loss"
	LedgerCount   LedgerKind = "count"
	LedgerRepair  LedgerKind = "repair"
	LedgerPause   LedgerKind = "pause"
	LedgerResume  LedgerKind = "resume"
	// A campaign's pool transfers, and transfers between locations.
	LedgerTransfer       LedgerKind = "transfer"
	LedgerTransferOut    LedgerKind = "transfer_out"
	LedgerTransferIn     LedgerKind = "transfer_in"
	LedgerReceive        LedgerKind = "receive"
	LedgerTransferCancel LedgerKind = "transfer_cancel"
	// Supplier inbound: expected (incoming), received (into available),
	// written off at a close, taken back by a cancel.
	LedgerInbound        LedgerKind = "inbound"
	LedgerInboundReceive LedgerKind = "inbound_receive"
	LedgerInboundShort   LedgerKind = "inbound_short"
	LedgerInboundCancel  LedgerKind = "inbound_cancel"
	// Holds: taken, sold, handed back.
	LedgerReserve        LedgerKind = "reserve"
	LedgerConfirm        LedgerKind = "confirm"
	LedgerRelease        LedgerKind = "release"
	LedgerReleasePartial LedgerKind = "release_partial"
	LedgerExpire         LedgerKind = "expire"
	LedgerRollback       LedgerKind = "rollback"
	// Held units a count found missing, leaving the books as their holds
	// end (shortfall), or sold by a confirm (sold_short).
	LedgerShortfall LedgerKind = "shortfall"
	LedgerSoldShort LedgerKind = "sold_short"
	// A stock row's balance carried forward from an archived month: the
	// sum of that month's rows it replaces (stockhold ledger archive).
	LedgerCarried LedgerKind = "carried"
	// LedgerBackorderFill is a receipt filling a hold's promised units:
	// available into reserved (a held hold) or sold (a confirmed one),
	// backordered down by as many; one row per hold filled.
	LedgerBackorderFill LedgerKind = "backorder_fill"
)

// LedgerKinds are every kind of ledger row.
var LedgerKinds = []LedgerKind{
	LedgerStockIn, LedgerAdjust, LedgerMove, LedgerLoss, LedgerCount, LedgerRepair, LedgerPause, LedgerResume,
	LedgerTransfer, LedgerTransferOut, LedgerTransferIn, LedgerReceive, LedgerTransferCancel,
	LedgerInbound, LedgerInboundReceive, LedgerInboundShort, LedgerInboundCancel,
	LedgerReserve, LedgerConfirm, LedgerRelease, LedgerReleasePartial, LedgerExpire, LedgerRollback,
	LedgerShortfall, LedgerSoldShort, LedgerCarried, LedgerBackorderFill,
}
