// Drives the scratch model 8 cycles and prints its two outputs: "y=<n> z=<n>".
#include <cstdio>

#include "Vvr_top.h"

int main() {
  Vvr_top top;
  top.clk_i = 0;
  top.rst_ni = 1;
  top.a_i = 3;
  top.b_i = 5;
  top.eval();
  top.rst_ni = 0;  // a falling edge: the asynchronous reset
  top.eval();
  top.rst_ni = 1;
  for (int i = 0; i < 8; ++i) {
    top.a_i = static_cast<unsigned char>(i);
    top.clk_i = 1;
    top.eval();
    top.clk_i = 0;
    top.eval();
  }
  std::printf("y=%d z=%d\n", static_cast<int>(top.y_o), static_cast<int>(top.z_o));
  top.final();
  return 0;
}
