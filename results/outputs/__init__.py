"""What a reader sees: the text tables, the summary, compare, the HTML report and its plots."""
