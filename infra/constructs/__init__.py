"""One construct per file; the stack only composes them."""
