#include "compiler/driver.h"

int main(int argc, char** argv) { return ampc::RunCli(argc, argv); }
