"""The HTML report: the page (html_report), its HTML pieces (html), its matplotlib plots (plots, only
with the ``[local]`` extra) and the observability appendix."""
