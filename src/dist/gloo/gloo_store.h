// GlooStore: lets gloo's rendezvous (gloo::rendezvous::Context::connectFullMesh) use any
// dist::Store, so gloo groups rendezvous through our TCPStore / FileStore / PrefixStore with our
// timeouts and error messages.
#pragma once

#include <gloo/rendezvous/store.h>

#include <memory>
#include <string>
#include <vector>

#include "dist/store.h"

namespace anvil::dist {

/// gloo::rendezvous::Store over a dist::Store. Waits without an explicit timeout use the
/// dist::Store's timeout; a timeout raises the dist::Store's Error (naming the keys).
class GlooStore : public gloo::rendezvous::Store {
 public:
  explicit GlooStore(std::shared_ptr<dist::Store> store) : store_(std::move(store)) {}
  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  std::shared_ptr<dist::Store> store_;
};

}  // namespace anvil::dist
