package dbtypes

// EncodeUUID is encodeUUID, for the external tests.
type EncodeUUID = encodeUUID
