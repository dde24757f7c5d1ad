/* linkcheck_main.c - the empty program each layer's objects are linked into with only the layer
 * libraries below it (iqf_linkcheck_<layer>, CMakeLists.txt): it links if and only if the layer
 * calls nothing above it. */
int main(void) { return 0; }
