# Doxygen input filter for include/chorus/: the headers use ordinary comments, which Doxygen
# skips. Turns them into Doxygen comments without touching the headers themselves.
# The first line of a file describes the file.
1s|^// |/// \\file\n/// |
1s|^/\* |/** \\file\n |
# A comment on its own line documents what follows it.
s|^\([[:space:]]*\)// |\1/// |
s|^\([[:space:]]*\)//$|\1///|
s|^\([[:space:]]*\)/\* |\1/** |
# A comment after a declaration documents that declaration.
s|\([;,]\)\([[:space:]]\+\)// |\1\2///< |
s|\([;,]\)\([[:space:]]\+\)/\* |\1\2/**< |
# Inside comments, "#include" and "<dtype>" are text, not a link request or an HTML tag.
/^[[:space:]]*\/\/\//{
  s|#include|\\#include|g
  s|<\([a-z_]*\)>|\\<\1\\>|g
}
