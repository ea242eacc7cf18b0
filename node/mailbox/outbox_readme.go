package mailbox

// readme is the README.txt of the outbox: the convention, for agents.
var readme = `This is the outbox of a meshd node. Drop a file here to send a message.

1. Write the file under a name that starts with "." (like .draft-123) or
   ends in ".tmp".
2. Rename it to a name that ends in ".txt" (like note-123.txt).

Only names that end in ".txt" and do not start with "." are picked up, so a
half-written file is never read. A file written directly under a ".txt"
name may be read before it is complete, and fail. (This README is never
sent.)

A file is headers, a line "---", then the body:

    To: #general
    ---
    Hello, everyone.

Headers (names are case-insensitive; any other header is refused):

    To: #channel | @name | name | ed25519:<key> | <fingerprint>   (required)
    Kind: message | request | response        (default: message)
    In-Reply-To: <message id>                 (message, optional)
    Intent: run-tests                         (request, required)
    Reply-To: <request id>                    (request: follow-up of that request)
    Request-ID: <request id>                  (response, required)
    Status: accepted | rejected | completed | failed   (response, required)
    Attach: /absolute/path/of/a/file          (any kind, optional; one line per
                                              file, at most 16: meshd copies each
                                              and the message lists it, signed)

The body is the message text; for a request, its params as one JSON value;
for a response, its result as one JSON value. Both may be empty. One final
newline is dropped.

To mark inbox items read (their files move from inbox/ to read/), drop a
file with the one header "Kind: read" and, as body, the Message-ID of each
item, one a line (at most 1000). NAME.sent then lists them as "Read:" lines.

    Kind: read
    ---
    01a1fe40-8b6f-7607-895e-1540d393bec2

When the file is sent it moves to ../sent/, next to NAME.sent with its
Message-ID (and Request-ID for a request). If it cannot be sent it moves to
../failed/, next to NAME.error, which says why. A file in ../.processing/
is being sent. If meshd stops in the middle of a send, the file is sent again
when meshd restarts, so in rare cases a message arrives twice.
`
