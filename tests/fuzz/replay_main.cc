// Replays a fuzz target's seed corpus as an ordinary test (tests/CMakeLists.txt builds one
// replayer per tests/fuzz/NAME_fuzz.cc and runs it on tests/fuzz/corpus/NAME/): every seed goes
// through the target's LLVMFuzzerTestOneInput once, in the normal and the ASan build, so that a
// seed that crashes (or, under ASan, touches memory it should not) fails every build, not just
// the fuzz job. Usage: REPLAYER FILE_OR_DIR...
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    if (fs::is_directory(argv[i])) {
      for (const auto& e : fs::directory_iterator(argv[i])) {
        if (e.is_regular_file()) inputs.push_back(e.path());
      }
    } else {
      inputs.emplace_back(argv[i]);
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "no seeds to replay\n");
    return 1;
  }
  std::sort(inputs.begin(), inputs.end());
  for (const fs::path& p : inputs) {
    std::ifstream in(p, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "cannot read %s\n", p.c_str());
      return 1;
    }
    const std::vector<char> bytes{std::istreambuf_iterator<char>(in), {}};
    std::printf("replaying %s (%zu bytes)\n", p.c_str(), bytes.size());
    std::fflush(stdout);  // a crash below names the seed that caused it
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("%zu seeds replayed\n", inputs.size());
  return 0;
}
