"""Sources that keep a collection in sync with where a team's knowledge already lives (Git, web, buckets, exports)."""
