#include "client_bindings.h"

#include <fmt/format.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client_files.h"
#include "client_inspection.h"
#include "client_tensors.h"
#include "errors.h"
#include "fast_method.h"
#include "hurray/client.h"
#include "hurray/pool_name.h"

namespace hurray::python {
namespace {

namespace py = pybind11;

// A wait in seconds as the client's milliseconds; None: 0, answer at once.
std::chrono::milliseconds WaitOf(std::optional<double> seconds) {
  if (!seconds) return std::chrono::milliseconds(0);
  if (!std::isfinite(*seconds) || *seconds < 0) {
    throw ToPython(
        InvalidArgumentError(
            fmt::format("wait {} must be a finite number of seconds, 0 or more", *seconds))
            .error());
  }
  return std::chrono::milliseconds(std::llround(*seconds * 1000));
}

// A spin in seconds as AcquireOptions::spin; None: 0.
std::chrono::microseconds SpinOf(std::optional<double> seconds) {
  if (!seconds) return std::chrono::microseconds(0);
  constexpr double kMaxSeconds = 3600;
  if (!std::isfinite(*seconds) || *seconds < 0 || *seconds > kMaxSeconds) {
    throw ToPython(
        InvalidArgumentError(fmt::format("spin {} must be a finite number of seconds, 0 to {}",
                                         *seconds, kMaxSeconds))
            .error());
  }
  constexpr double kMicrosecondsPerSecond = 1e6;
  return std::chrono::microseconds(std::llround(*seconds * kMicrosecondsPerSecond));
}

// Runs `call` (a blocking call of the C++ client) without the GIL; its Result's value, or
// its error raised.
template <typename Call>
auto WithoutGil(Call&& call) {
  auto result = [&] {
    const py::gil_scoped_release release;
    return call();
  }();
  return ValueOrRaise(std::move(result));
}

// hurray.Client: one session with the daemon. close() drops it; tensors and views made
// through it keep the session alive until they are gone.
class PyClient {
 public:
  explicit PyClient(std::shared_ptr<Client> client) : client_(std::move(client)) {}

  [[nodiscard]] const std::shared_ptr<Client>& Open() const {
    if (!client_) throw ToPython(FailedPreconditionError("the hurray.Client is closed").error());
    return client_;
  }
  // The client, or null once closed.
  [[nodiscard]] Client* get() const { return client_.get(); }
  void Close() {
    std::shared_ptr<Client> client = std::move(client_);
    const py::gil_scoped_release release;
    client.reset();
  }

 private:
  std::shared_ptr<Client> client_;
};

PyClient Connect(const std::optional<std::string>& socket, const std::string& name) {
  Client::Options options;
  options.socket_path = socket.value_or("");
  options.client_name = name;
  return PyClient(std::shared_ptr<Client>(WithoutGil([&] { return Client::Connect(options); })));
}

PyTensorView Acquire(const PyClient& self, const std::string& name, std::optional<double> wait,
                     std::optional<std::uint64_t> version, bool populate,
                     std::optional<double> spin) {
  const AcquireOptions options{.version = version.value_or(0),
                               .wait = WaitOf(wait),
                               .populate = populate,
                               .spin = SpinOf(spin)};
  const std::shared_ptr<Client>& client = self.Open();
  // The fast path never blocks: served with the GIL held, saving its release and retaking.
  if (std::optional<TensorView> fast = client->AcquireIfFast(name, options)) {
    return PyTensorView(PyTensorView::MakeLease(std::move(*fast)));
  }
  return PyTensorView(
      PyTensorView::MakeLease(WithoutGil([&] { return client->Acquire(name, options); })));
}

PyTensorViewBatch BatchAcquire(const PyClient& self, const std::vector<std::string>& names,
                               const std::string& prefix, std::optional<double> wait) {
  const std::chrono::milliseconds timeout = WaitOf(wait);
  const std::shared_ptr<Client>& client = self.Open();
  return PyTensorViewBatch(
      WithoutGil([&] { return client->BatchAcquire(names, prefix, timeout); }));
}

std::vector<TensorSummary> List(const PyClient& self, const std::string& prefix) {
  const std::shared_ptr<Client>& client = self.Open();
  std::vector<TensorSummary> all;
  std::string token;
  do {
    TensorListPage page = WithoutGil([&] { return client->List(prefix, 0, token); });
    all.insert(all.end(), std::make_move_iterator(page.tensors.begin()),
               std::make_move_iterator(page.tensors.end()));
    token = std::move(page.next_page_token);
  } while (!token.empty());
  return all;
}

PyWatch Watch(const PyClient& self, const std::string& prefix) {
  const std::shared_ptr<Client>& client = self.Open();
  auto queue = std::make_shared<WatchQueue>();
  std::unique_ptr<WatchHandle> handle = WithoutGil([&] {
    return client->Watch(
        prefix, [queue](const WatchEvent& event) { queue->Push(event); },
        [queue](const Status& status) { queue->End(status); });
  });
  return {std::move(queue), std::move(handle)};
}

// The classes of the fast methods' objects, once bound.
const py::detail::type_info* g_client_type = nullptr;  // NOLINT(*-non-const-global-variables)
const py::detail::type_info* g_view_type = nullptr;    // NOLINT(*-non-const-global-variables)

// client.acquire(name), the name alone (a str), when the fast path serves it; anything else
// (other arguments, a closed client, a lease to ask the daemon for) is the bound acquire's.
PyObject* FastAcquire(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (nargs != 1 || kwnames != nullptr || PyUnicode_CheckExact(args[0]) == 0) return nullptr;
  const auto* client = ExactInstance<PyClient>(self, g_client_type);
  if (client == nullptr || client->get() == nullptr) return nullptr;
  Py_ssize_t size = 0;
  const char* name = PyUnicode_AsUTF8AndSize(args[0], &size);
  if (name == nullptr) {
    PyErr_Clear();  // Not UTF-8 (a lone surrogate): the bound acquire says so.
    return nullptr;
  }
  std::optional<TensorView> view = client->get()->AcquireIfFast(
      std::string_view(name, static_cast<std::size_t>(size)), AcquireOptions{});
  if (!view) return nullptr;
  return NewInstance(std::make_unique<PyTensorView>(PyTensorView::MakeLease(std::move(*view))),
                     g_view_type);
}

// view.release(), no stream, of a view whose release cannot block nor fail (a fast path
// view's: its pin cleared); anything else is the bound release's.
PyObject* FastRelease(PyObject* self, PyObject* const* /*args*/, Py_ssize_t nargs,
                      PyObject* kwnames) {
  if (nargs != 0 || kwnames != nullptr) return nullptr;
  auto* view = ExactInstance<PyTensorView>(self, g_view_type);
  if (view == nullptr || !view->ReleaseIfFast()) return nullptr;
  Py_RETURN_NONE;
}

FastMethod g_fast_acquire{.fast = &FastAcquire};  // NOLINT(*-non-const-global-variables)
FastMethod g_fast_release{.fast = &FastRelease};  // NOLINT(*-non-const-global-variables)

// The warm loop's two calls, client.acquire(name) and view.release(), as fast methods.
void InstallFastCalls(py::module_& module) {
  g_client_type = BoundType<PyClient>();
  g_view_type = BoundType<PyTensorView>();
  InstallFastMethod<g_fast_acquire>(module.attr("Client"), "acquire");
  InstallFastMethod<g_fast_release>(module.attr("TensorView"), "release");
}

void BindClientClass(py::module_& module) {
  py::class_<PyClient>(module, "Client", "A session with hurrayd; see hurray.connect.")
      .def("close", &PyClient::Close, "Ends this object's share of the session.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PyClient& self, const py::args&) { self.Close(); })
      .def_property_readonly(
          "socket_path", [](const PyClient& self) { return self.Open()->socket_path(); },
          "The path of the daemon's socket this client connected to. "
          "hurray.FailedPreconditionError once closed.")
      .def_property_readonly(
          "session_id", [](const PyClient& self) { return self.Open()->session_id(); },
          "The daemon's id of this session. hurray.FailedPreconditionError once closed.")
      .def(
          "empty",
          [](const PyClient& self, const std::vector<std::int64_t>& shape, py::handle dtype,
             const std::string& pool) {
            const std::shared_ptr<Client>& client = self.Open();
            return std::make_unique<PyWritableTensor>(
                client, AllocateIn(*client, DenseDescriptor(shape, dtype, pool), pool));
          },
          py::arg("shape"), py::arg("dtype"), py::arg("pool") = std::string(kDefaultPoolName),
          "A dense tensor of `shape` and `dtype` allocated in `pool`, to fill and publish.")
      .def(
          "allocate",
          [](const PyClient& self, const TensorDescriptor& descriptor, const std::string& pool) {
            const std::shared_ptr<Client>& client = self.Open();
            return std::make_unique<PyWritableTensor>(client,
                                                      AllocateIn(*client, descriptor, pool));
          },
          py::arg("descriptor"), py::arg("pool") = std::string(kDefaultPoolName),
          "The buffers of `descriptor` allocated in `pool`, to fill and publish.")
      .def(
          "publish",
          [](const PyClient& self, const std::string& name, py::handle obj, const std::string& pool,
             bool evictable) {
            const std::shared_ptr<Client>& client = self.Open();
            PyWritableTensor tensor(client, CopyIntoPool(*client, obj, pool));
            return tensor.Publish(name, std::nullopt, PublishOptions{.evictable = evictable})
                .version;
          },
          py::arg("name"), py::arg("obj"), py::arg("pool") = std::string(kDefaultPoolName),
          py::kw_only(), py::arg("evictable") = false,
          "Copies `obj` (ndarray, CPU torch tensor, hurray.Tensor) once into `pool` and "
          "publishes it under `name`; returns the version. `evictable`: the daemon may evict "
          "it (least recently used, never while leased) when the pool is full.")
      .def(
          "publish_batch",
          [](const PyClient& self, const std::vector<PyWritableTensor*>& tensors,
             const std::vector<std::string>& names) {
            return PyWritableTensor::PublishBatch(*self.Open(), tensors, names);
          },
          py::arg("tensors"), py::arg("names"),
          "Publishes tensors[i] under names[i], all at once: every one becomes visible "
          "together, or none does. Returns the versions; on error every tensor is still "
          "yours. hurray.BufferError for a sealed-pool tensor with an array or memoryview "
          "over its memory alive.")
      .def(
          "import_safetensors",
          [](const PyClient& self, const py::object& path, const std::string& prefix,
             const std::optional<std::string>& pool, const py::object& progress) {
            return ImportFile(*self.Open(), path, ImportedFormat::kSafetensors, prefix, pool,
                              progress);
          },
          py::arg("path"), py::arg("prefix"), py::arg("pool") = py::none(),
          py::arg("progress") = py::none(),
          "Publishes every tensor of a .safetensors file (or a sharded model's "
          "*.safetensors.index.json) under prefix + its name, all at once, read straight into "
          "`pool`. progress(bytes_done, bytes_total) is called as bytes move. Returns "
          "{'tensors', 'bytes', 'seconds'}; on error nothing is published or left allocated.")
      .def(
          "load",
          [](const PyClient& self, const py::object& path, const std::string& prefix,
             const std::optional<std::string>& pool, const py::object& progress) {
            return ImportFile(*self.Open(), path, ImportedFormat::kHrry, prefix, pool, progress);
          },
          py::arg("path"), py::arg("prefix") = "", py::arg("pool") = py::none(),
          py::arg("progress") = py::none(),
          "Publishes every tensor of a .hrry file under prefix + its saved name, all at once, "
          "as import_safetensors does. Returns {'tensors', 'bytes', 'seconds'}.")
      .def(
          "save",
          [](const PyClient& self, const std::string& prefix, const py::object& path,
             const py::object& progress) { return SaveFile(*self.Open(), prefix, path, progress); },
          py::arg("prefix"), py::arg("path"), py::arg("progress") = py::none(),
          "Writes every tensor published under `prefix` (one consistent set) to a .hrry file "
          "at `path`, under their full names. Returns {'tensors', 'bytes', 'seconds'}.")
      .def("acquire", &Acquire, py::arg("name"), py::arg("wait") = py::none(),
           py::arg("version") = py::none(), py::arg("populate") = false,
           py::arg("spin") = py::none(),
           "Leases the published tensor `name` (waiting up to `wait` seconds for it; polling "
           "for the answer `spin` seconds before sleeping).")
      .def("batch_acquire", &BatchAcquire, py::arg("names") = std::vector<std::string>(),
           py::arg("prefix") = "", py::arg("wait") = py::none(),
           "Leases every listed name and every name under `prefix`, all or none.")
      .def("list", &List, py::arg("prefix") = "", "The published names under `prefix`.")
      .def(
          "describe",
          [](const PyClient& self, const std::string& name, std::uint64_t version) {
            const std::shared_ptr<Client>& client = self.Open();
            return WithoutGil([&] { return client->Describe(name, version); });
          },
          py::arg("name"), py::arg("version") = 0,
          "Version `version` of `name` in full (0: the latest), and every live version of the "
          "name: a hurray.TensorDetails. hurray.NotFoundError when there is no such version.")
      .def(
          "stats",
          [](const PyClient& self) {
            const std::shared_ptr<Client>& client = self.Open();
            return WithoutGil([&] { return client->Stats(); });
          },
          "The daemon's pools, sessions, leases and tensors: a hurray.DaemonStats.")
      .def(
          "delete",
          [](const PyClient& self, const std::string& name, std::uint64_t version) {
            const std::shared_ptr<Client>& client = self.Open();
            return WithoutGil([&] { return client->Delete(name, version); });
          },
          py::arg("name"), py::arg("version") = 0, "Deletes versions of `name`; returns how many.")
      .def("watch", &Watch, py::arg("prefix") = "",
           "An iterator over publishes and deletes under `prefix`.");
}

}  // namespace

void BindClient(py::module_& module) {
  BindInspection(module);
  BindTensors(module);
  BindClientClass(module);
  InstallFastCalls(module);
  module.def("connect", &Connect, py::arg("socket") = py::none(), py::arg("name") = "python",
             "Connects to hurrayd (socket None: $HURRAY_SOCKET or the default path).");
}

}  // namespace hurray::python
