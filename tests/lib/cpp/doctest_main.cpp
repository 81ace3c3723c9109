// main() of every doctest unit test executable.
#include "case_report.hpp"

int main(int argc, char** argv) { return nbdsched::testlib::run_doctest(argc, argv); }
