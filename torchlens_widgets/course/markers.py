"""Marker lines shared by the release (which writes them) and the checks (which read them)."""

#: Where a source test cell's hidden tests were, the student version says so in this line: a check that
#: finds it in its own cell knows it ran the visible tests only.
HIDDEN_PLACEHOLDER = "# (more tests, hidden from this copy, run here when your notebook is graded)"

#: The line a stubbed solution raises with; the check that calls the stub says "not done yet".
STUB_MESSAGE = "write your answer here"
