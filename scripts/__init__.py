"""Developer scripts: files the repository generates (the chart's README, the dashboard picture)."""
