// Package mailbox is the plain-text face of a node ("the filesystem
// is truth"): a mirror that writes every delivered envelope as
// a text file an agent can read with cat and grep, an offline verifier that
// checks such a file against the signed envelope it carries, and an outbox
// from which an agent sends by dropping a file.
//
// [Loop] runs the mirror for a node: it writes the file of every
// delivery the node queues, moves read items' files, checkpoints the
// files with one syncfs a second (the store holds every envelope before
// its file is written, so a start rewrites from the store what a crash or
// a power loss left missing or cut short), pauses past the mailbox's
// quota and retries with backoff what a full disk refused. It reads the
// node only through [Host].
//
// Every path below is relative to the mailbox root, <home>/mailbox.
//
// # Mirror files
//
// Each delivered envelope becomes one file
//
//	<YYYY-MM-DD>/inbox/<HHMMSS>-<id12>.txt
//
// where the date and time are the delivery time in UTC and <id12> is the
// last 12 hex digits of the envelope id. The file of an inbox item the
// node marks read moves to <YYYY-MM-DD>/read/ under the same name
// ([Mirror.MoveToRead], one rename; the name is numbered there only if
// it is taken), or is written there at once when the item was read
// before its file was written ([Item].Folder): inbox/ holds the unread
// items and read/ the read ones, so an agent that reads only files sees
// the read state. What the node itself sends (channel messages, DMs,
// requests, responses) is written to <YYYY-MM-DD>/sent/, named by the
// envelope's ts, in the same format without a Priority header. If that name is taken, "-2", "-3",
// ... is inserted before ".txt". Files are UTF-8 with "\n" line ends,
// mode 0600 in folders of mode 0700: the mailbox holds every DM, so only
// its owner reads it, unless [Config.Access] names a group that may (files
// 0640, folders 0750 with the setgid bit). A file is a block of headers, a line "---", the body, and an
// armor block:
//
//	From: alice (1a2b3c4d5e6f7a8b)
//	From-Key: ed25519:...
//	To: #general
//	Channel-ID: 0192a7c4-...
//	Kind: message
//	Date: 2026-11-21T12:00:01.123Z
//	Expires: 2026-11-21T12:05:01.123Z
//	Message-ID: 0192a7c4-...
//	Seq: 42
//	Epoch: 0192a7c0-...
//	Priority: normal
//	---
//	the message text
//	-----BEGIN MESHD ENVELOPE-----
//	<standard base64 of the wire envelope, in lines of 76 characters>
//	-----END MESHD ENVELOPE-----
//
// Headers are "Name: value", one per line, in this order, each present
// only where it applies:
//
//	From         the sender's roster name ("-" if it has none or is
//	             unknown), a space, and its fingerprint in parentheses
//	From-Key     the sender's full key text, ed25519:<base64url>
//	To           "#name" for a channel; "@name" for a peer, or
//	             "@<fingerprint>" when the peer has no name. When the
//	             writer was given no name: "#<channel id>" or
//	             "@<fingerprint>"
//	Channel-ID   the channel id (channel destinations only)
//	Kind         message, request or response; delivery_failed or
//	             subagent_result for those local items
//	Date         the envelope's ts, RFC 3339 in UTC with milliseconds
//	Expires      ts + ttl_secs, in the same form
//	Message-ID   the envelope id
//	Seq          sender_seq, in decimal
//	Epoch        sender_epoch
//	Priority     high, normal or low: the inbox priority (local)
//	Subagent-ID  a subagent result's subagent id (from its body)
//	In-Reply-To  a message's in_reply_to, when set
//	Request-ID   a request's or a response's request_id
//	Intent       a request's intent
//	Hop          a request's hop, in decimal
//	Reply-To     a follow-up request's reply_to (the parent request id)
//	Status       a response's status: accepted, rejected, completed or
//	             failed
//	Attachments  the files the envelope lists (PROTOCOL.md §6.8), each as
//	             its quoted name, size and SHA-256: "fix.patch" 262148
//	             bytes sha256 c17e..., separated by ", "
//	Source       "history" when the envelope arrived through history
//	             sync (local)
//
// The files themselves appear, once fetched and verified, in
// <YYYY-MM-DD>/attachments/<HHMMSS>-<id12>/ (the day and name of the
// envelope's mirror file, [AttachmentDir]), hard links to the node's blob
// store or copies renamed into place: never a partial file. They are
// read-only, readable by the group of a shared mailbox, in folders it
// may not write ([Access.PlaceAttachment]).
//
// A To value whose name has the form of a channel id (after "#") or of a
// fingerprint (after "@") is taken as that id and checked against the
// envelope, never as a name; so a name of that form only verifies against
// the roster or the channel policies.
//
// Header values never contain a control character: each one (and U+2028,
// U+2029 and every byte that is not UTF-8) is written as "?". Roster names
// and channel names cannot hold one anyway; this is defence in depth, and
// [Verify] applies the same rendering.
//
// The body of a message is its text: it may hold anything, including
// lines that look like headers, "---" or an armor line; only control
// characters (but tab, line feed, and a carriage return before a line
// feed), U+2028, U+2029 and bidi controls are written as \uXXXX, so that
// a terminal showing the file obeys none of them. The body
// of a request is its params, and of a response its result, as JSON
// indented by two spaces ([proto.CBORToJSON], then [json.Indent]); it is
// empty when the envelope carries none. The body region of the file is
// exactly the body followed by one "\n" unless the body is empty or already
// ends in "\n".
//
// The armor block is the line "-----BEGIN MESHD ENVELOPE-----", the
// complete wire envelope ([proto.SignedEnvelope].Raw) in standard base64
// with padding, wrapped at 76 characters, and the line
// "-----END MESHD ENVELOPE-----", which ends the file.
//
// A reader splits a file like this, which is how [Verify] does it:
//
//  1. The armor block starts at the last line of the file that is exactly
//     "-----BEGIN MESHD ENVELOPE-----" and runs to the end.
//  2. The headers are the lines from the start of the file up to the first
//     line that is exactly "---".
//  3. The body region is everything between that "---" line and the armor
//     block. Removing one final "\n" from a non-empty region gives the body
//     up to its last newline: a body that ended in "\n" and one that did
//     not look alike, and the envelope settles which it was.
//
// # Verification
//
// [Verify] checks a file offline: it decodes the armor block, parses the
// envelope strictly, checks its signature over the exact signed bytes, then
// renders the headers, the body and the armor block again from the
// envelope and compares them with the file, reporting the first difference
// as a [*MismatchError]. Priority and Source are local annotations of the
// receiving node, not covered by the signature: they must be well formed,
// and are taken as the file states them. The sender's name and the
// channel's or peer's name are checked against a roster and channel
// policies when [VerifyOptions] gives them, and are otherwise reported in
// [Verified].Unchecked; the fingerprint in From always has to match.
//
// # Daily index
//
// <YYYY-MM-DD>/index.txt gets one line per mirror file written that day:
//
//	HH:MM:SS<TAB>priority<TAB>kind<TAB>from<TAB>to<TAB>inbox/<file name><TAB>summary
//
// with the delivery time in UTC, the priority ("-" if none), the From and To
// header values, the file name relative to the date directory (inbox/,
// read/ for a file written read, sent/; a file that moves to read/ keeps
// its inbox/ line), and as
// summary the first 80 characters of the body once every run of spaces and
// control characters (newlines, tabs) is turned into one space, with no
// space at either end; bytes that are not UTF-8 become "?". The index is a
// convenience digest: the files are the record. A crash can keep the lines
// of the last batch out of it (a line cut short is ended before the next
// one is appended); [Mirror.Reindex] appends the lines of files an index
// lacks, and meshd calls it at start for the files written since its last
// checkpoint, so those lines then follow later ones.
//
// # Writing
//
// [Mirror.Write] writes a batch of files: each to a temporary file named
// ".tmp-*" in its final directory, fsynced, then renamed into place
// without replacing a file (renameat2 with RENAME_NOREPLACE on Linux; a
// link and an unlink elsewhere); each directory touched is fsynced once,
// after all the renames of the batch; then the index lines are appended
// and each index fsynced once. The files of a batch are fsynced
// concurrently, which lets the file system commit them together. A file
// appears only complete, under its final name; a crash never leaves a
// partial file under a final name, readers skip names that start with
// ".", and [Open] removes the temporary files a crash left.
//
// meshd turns the fsyncs off (Config.SyncFiles false): every envelope is
// durable in its history store before it is mirrored, so the files are a
// projection it can write again. It calls [Mirror.Sync] (one syncfs) at
// most once a second while files are being written (where the system has
// no syncfs, an fsync of each file and directory written since the last
// call), records the newest delivery time that sync covered, and at start reads the files delivered
// after it with [Complete], rewriting any that a power loss left empty or
// cut short. A process crash (SIGKILL) loses nothing either way: what was
// written is in the page cache. This makes a file cost a create, a write
// and a rename instead of three fsyncs. syncfs writes back every dirty
// file of the file system, not only the mailbox's: on a host where other
// programs write much to the same file system, that writeback joins the
// checkpoint (it runs on the mirror's goroutine and delays files, never
// deliveries). So while meshd writes an attachment's chunks
// ([LoopConfig].Bulk), a due checkpoint waits, for at most 30 s: its
// syncfs would write the part file back under the chunk writer, and the
// loop would wait on it (a 256 MiB DM between two nodes of one host spent
// about a second blocked in syncfs, and its chunk writer half a second
// throttled behind that writeback; half as long with the wait).
//
// Every envelope is in the history store before it is mirrored, so a
// failed write loses nothing: the caller logs it and counts it (a full
// disk wraps [ErrDiskFull]), the history still has the message, and the
// caller writes the file again once the disk has room (meshd retries
// with backoff, from the store).
//
// # Bounds
//
// The mirror follows the store: when meshd's retention removes an
// envelope, it removes the envelope's file ([RemoveFile]; the day's index
// keeps its line). meshd also counts the files ([Usage]) and pauses the
// mirror past its own limits (files, bytes, free space on the file
// system), writing the files it held back from the store once there is
// room again: see docs/meshd.toml, mailbox_max_files.
//
// # Outbox
//
// An agent sends by dropping a file in outbox/. It writes the file under a
// name that starts with "." (such as ".draft-123") or ends in ".tmp", then
// renames it to a name that ends in ".txt". Only names that end in ".txt"
// and do not start with "." are picked up (README.txt, which explains the
// convention to agents, never is), so a half-written file is never read;
// a file written directly under its ".txt" name may be read before it is
// complete, and then lands in failed/. A
// file is headers (case-insensitive names), a line "---", and a body:
//
//	To: #general | @bob | bob | ed25519:... | <fingerprint>
//	Kind: message          (the default; or request, response)
//	Intent: run-tests      (request: required)
//	Reply-To: <id>         (request: the parent request of a follow-up)
//	Request-ID: <id>       (response: required)
//	Status: completed      (response: required)
//	In-Reply-To: <id>      (message: optional)
//	Attach: /path/file     (any kind: optional, one line per file, absolute)
//	---
//	<body>
//
// A file with the one header "Kind: read" sends nothing: its body lists
// Message-IDs, one a line (blank lines and lines starting with "#" are
// skipped, at most [MaxReadIDs]), and the node marks those inbox items
// read ([OutgoingMessage].Read); its .sent note has a "Read:" line for
// each instead of "Message-ID:". If any id cannot be marked (unknown, or
// shared by several senders), the file goes to failed/ naming them, the
// others being marked.
//
// The body is the message text, a request's params as JSON, or a
// response's result as JSON (both may be empty), less one final newline.
// Unknown headers, a header used twice and a header that does not apply to
// the kind are refused, naming the header and its line, so a typo never
// goes out as something else.
//
// [Outbox.Run] watches outbox/ with fsnotify, and scans it every
// [OutboxConfig].ScanInterval too (for files present at start, and in case
// an event is lost). It takes files one at a time in name order: it claims
// a file by renaming it into .processing/ (beside outbox/, so no two
// scanners take one file, and no member of the mailbox group can rename
// meshd's working state), parses it, and hands it to the node's send function. On
// success it writes sent/<name>.sent (lines "Message-ID:", "Request-ID:"
// for a request, and "Sent:") and then moves the file to sent/<name>, so the
// .sent file is there whenever the file is. On failure it writes
// failed/<name>.error (the reason on one line, and a "hint:" line if there
// is one) and moves the file to failed/<name>. The agent's file is never
// modified. Where a name is taken in sent/ or failed/, "-2", "-3", ... is
// inserted before ".txt".
//
// Delivery is at least once: a file found in .processing/ when Run starts
// was interrupted by a crash or a kill, possibly after it was sent, and is
// processed again (and logged). Receivers drop duplicates only by envelope
// id, and the second send has a new id, so such a file can arrive twice.
// A send interrupted by Run's own cancellation is put back in outbox/.
package mailbox
