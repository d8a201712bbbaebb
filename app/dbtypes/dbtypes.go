// Package dbtypes sets how pgx moves stockhold's values on every
// connection of its pools (the app's and the tests'), so that what a query
// returns does not depend on which pool ran it.
package dbtypes

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Register is a pool's AfterConnect: it teaches the connection's type map
// two things.
//
// google/uuid's UUID, the type sqlc generates for uuid columns. pgx does
// not know it and falls back on its driver.Valuer: every id formatted as
// text, then parsed back into 16 bytes through a failed plan that builds an
// error each time, for every id of the arrays the hold batches send.
// Encoded as its 16 bytes, it is a copy. What goes over the wire is the same binary uuid
// either way.
//
// timestamptz is scanned in UTC, the API's time zone, whatever the
// server's (pgx's default is time.Local), so no domain code converts the
// times it reads.
func Register(_ context.Context, conn *pgx.Conn) error {
	m := conn.TypeMap()
	m.RegisterType(&pgtype.Type{Name: "uuid", OID: pgtype.UUIDOID, Codec: uuidCodec{}})
	tz := &pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID, Codec: &pgtype.TimestamptzCodec{ScanLocation: time.UTC}}
	m.RegisterType(tz)
	m.RegisterType(&pgtype.Type{Name: "_timestamptz", OID: pgtype.TimestamptzArrayOID, Codec: &pgtype.ArrayCodec{ElementType: tz}})
	return nil
}

// uuidCodec is pgx's UUIDCodec that also encodes uuid.UUID directly.
type uuidCodec struct{ pgtype.UUIDCodec }

func (c uuidCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if _, ok := value.(uuid.UUID); ok && format == pgtype.BinaryFormatCode {
		return encodeUUID{}
	}
	return c.UUIDCodec.PlanEncode(m, oid, format, value)
}

type encodeUUID struct{}

func (encodeUUID) Encode(value any, buf []byte) ([]byte, error) {
	u := value.(uuid.UUID)
	return append(buf, u[:]...), nil
}
