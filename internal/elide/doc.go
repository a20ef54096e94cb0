// Package elide shortens text for error messages: a value quoted from a
// user's file or from another program's output may be megabytes long or
// hold binary bytes, and a message that quotes it must stay one readable
// line. Long text keeps its start and its end, the part that usually tells
// two values apart, with "…" in place of the middle.
package elide
