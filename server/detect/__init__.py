"""Detection: observations that open incidents (hung jobs, stragglers, silent nodes, fatal Xids), and
the watchdog thread that runs the periodic checks."""
