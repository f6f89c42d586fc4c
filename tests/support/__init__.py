"""Helpers the tests share (not tests themselves): stores built as each upstream release
leaves them (`legacy`), upstream's own SQL (`upstream_sql`), the command run as a user runs it
(`clirun`), the sync checks (`synccheck`), worker processes (`processes`) and the blocking
AsyncStore facade (`asyncfacade`)."""
