package proto

// IntentCancel is the intent of a cancel: a Request (§6.2) whose params
// are {"request_id": "<id of the request to cancel>"}, sent by the
// requester to the peer it asked. It is an ordinary Request on the wire,
// so a node that predates it delivers it as one (docs/PROTOCOL.md §6.2).
const IntentCancel = "meshd.cancel"
