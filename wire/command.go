package wire

import "strconv"

// Command is a request's command word. The values are the seed's
// (TCAPLUS_API_*_REQ); the eight read commands are the ones read retry may
// re-send (SPEC R4).
type Command uint32

// Read commands (SPEC R4). The first three are simple reads (one key, one
// answer); the other five are complex reads that may answer in many packets.
const (
	// CmdGet is TCAPLUS_API_GET_REQ: one record by key. Simple read.
	CmdGet Command = 7
	// CmdPBFieldGet is TCAPLUS_API_PB_FIELD_GET_REQ: fields of one record. Simple read.
	CmdPBFieldGet Command = 103
	// CmdListGet is TCAPLUS_API_LIST_GET_REQ: one element of a list. Simple read.
	CmdListGet Command = 15
	// CmdBatchGet is TCAPLUS_API_BATCH_GET_REQ: many keys. Complex (batch) read.
	CmdBatchGet Command = 23
	// CmdPBBatchFieldGet is TCAPLUS_API_PB_BATCH_FIELD_GET_REQ: fields of many keys. Complex (batch) read.
	CmdPBBatchFieldGet Command = 117
	// CmdListGetBatch is TCAPLUS_API_LIST_GET_BATCH_REQ: many list elements. Complex (batch) read.
	CmdListGetBatch Command = 153
	// CmdGetByPartKey is TCAPLUS_API_GET_BY_PARTKEY_REQ: every record of a
	// part key, streamed in a fixed order. Complex (index) read.
	CmdGetByPartKey Command = 25
	// CmdListGetAll is TCAPLUS_API_LIST_GETALL_REQ: a whole list, streamed in
	// order. Complex (index) read.
	CmdListGetAll Command = 11
)

// Write commands. They carry key and value and are never retried by read
// retry (SPEC R3), whatever a configuration lists.
const (
	// CmdInsert is TCAPLUS_API_INSERT_REQ.
	CmdInsert Command = 1
	// CmdReplace is TCAPLUS_API_REPLACE_REQ.
	CmdReplace Command = 3
	// CmdUpdate is TCAPLUS_API_UPDATE_REQ.
	CmdUpdate Command = 5
	// CmdDelete is TCAPLUS_API_DELETE_REQ (its value is usually empty).
	CmdDelete Command = 9
)

// ReadCommands lists the eight read commands in the seed's order, the
// default of the directory's ReadRetryCmd (SPEC R4, R5). Callers must not
// modify it.
var ReadCommands = [8]Command{
	CmdGet, CmdPBFieldGet, CmdListGet,
	CmdBatchGet, CmdPBBatchFieldGet, CmdListGetBatch,
	CmdGetByPartKey, CmdListGetAll,
}

// BodyKind is the shape of a request body, decided by its command.
type BodyKind uint8

const (
	// BodyUnknown is the kind of a command this codec does not know.
	BodyUnknown BodyKind = iota
	// BodyKey is one key: the simple reads.
	BodyKey
	// BodyBatch is N keys, each with its original index: the batch reads.
	BodyBatch
	// BodyIndex is a part key, a resume position and a limit: the index reads.
	BodyIndex
	// BodyKeyValue is a key and a value: the writes.
	BodyKeyValue
)

// String returns the kind's name, for logs and test failures.
func (k BodyKind) String() string {
	switch k {
	case BodyKey:
		return "key"
	case BodyBatch:
		return "batch"
	case BodyIndex:
		return "index"
	case BodyKeyValue:
		return "key-value"
	}
	return "unknown"
}

// Body returns the body shape of c's requests, or BodyUnknown for a command
// the codec does not carry (SQL and the like: SPEC R4 leaves them out).
func (c Command) Body() BodyKind {
	switch c {
	case CmdGet, CmdPBFieldGet, CmdListGet:
		return BodyKey
	case CmdBatchGet, CmdPBBatchFieldGet, CmdListGetBatch:
		return BodyBatch
	case CmdGetByPartKey, CmdListGetAll:
		return BodyIndex
	case CmdInsert, CmdReplace, CmdUpdate, CmdDelete:
		return BodyKeyValue
	}
	return BodyUnknown
}

// IsRead reports whether c is one of the eight read commands of SPEC R4.
func (c Command) IsRead() bool {
	switch c.Body() {
	case BodyKey, BodyBatch, BodyIndex:
		return true
	}
	return false
}

// IsSimpleRead reports whether c is a simple read (7, 103, 15): one packet
// answers it, and SPEC R6's schedule applies.
func (c Command) IsSimpleRead() bool { return c.Body() == BodyKey }

// IsComplexRead reports whether c is a complex read (batch or index), whose
// answer may span many packets and whose schedule is SPEC R10's.
func (c Command) IsComplexRead() bool {
	k := c.Body()
	return k == BodyBatch || k == BodyIndex
}

// String returns the seed's name of c (without the TCAPLUS_API_ prefix and
// _REQ suffix), or "cmd(N)" for an unknown command. It allocates only for
// unknown commands.
func (c Command) String() string {
	switch c {
	case CmdGet:
		return "GET"
	case CmdPBFieldGet:
		return "PB_FIELD_GET"
	case CmdListGet:
		return "LIST_GET"
	case CmdBatchGet:
		return "BATCH_GET"
	case CmdPBBatchFieldGet:
		return "PB_BATCH_FIELD_GET"
	case CmdListGetBatch:
		return "LIST_GET_BATCH"
	case CmdGetByPartKey:
		return "GET_BY_PARTKEY"
	case CmdListGetAll:
		return "LIST_GETALL"
	case CmdInsert:
		return "INSERT"
	case CmdReplace:
		return "REPLACE"
	case CmdUpdate:
		return "UPDATE"
	case CmdDelete:
		return "DELETE"
	}
	return "cmd(" + strconv.FormatUint(uint64(c), 10) + ")"
}
