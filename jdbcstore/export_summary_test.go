package jdbcstore

// DeadSummaryQuery returns the query and arguments of a
// ListDeadSummaries page.
func DeadSummaryQuery(s *Store, f DeadFilter, after string, limit int) (string, []any) {
	return s.deadPageQuery(selectColumns(s.dialect, summaryColumns), f, after, limit)
}
