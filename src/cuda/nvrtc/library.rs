//! Finding and loading NVRTC: the library (`DLC_NVRTC_LIB`, the `.cuda/` wheels, the system's)
//! and the CUDA include directory, checked once per process ([`toolchain`]).

use super::{api, NvrtcError};
use crate::cuda::{wheel_dir, ENV_CUDA_INCLUDE, ENV_NVRTC_LIB, INSTALL_SUGGESTION};
use cudarc::nvrtc::sys;
use std::ffi::c_int;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The NVRTC found on this machine.
#[derive(Debug)]
pub struct Toolchain {
    /// The library loaded: a path, or `system` when found by the loader's search.
    pub library: String,
    /// The CUDA include directory passed as `-I`.
    pub include_dir: PathBuf,
    /// NVRTC's version, `(major, minor)`.
    pub version: (i32, i32),
    /// Keeps the preloaded library mapped for the life of the process.
    _preloaded: Option<libloading::Library>,
}

/// Where libnvrtc is, before loading it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LibChoice {
    /// A file given by `DLC_NVRTC_LIB` or installed under `.cuda/`.
    Path(PathBuf),
    /// The loader's search by library name.
    System,
}

/// Loads (once per process) and describes NVRTC; [`NvrtcError::Unavailable`] with the
/// suggestion to run `scripts/install-cuda-wheels.sh` when it is missing.
pub fn toolchain() -> Result<&'static Toolchain, NvrtcError> {
    static TOOLCHAIN: OnceLock<Result<Toolchain, NvrtcError>> = OnceLock::new();
    TOOLCHAIN
        .get_or_init(|| {
            let env_lib = std::env::var(ENV_NVRTC_LIB).ok();
            let env_include = std::env::var(ENV_CUDA_INCLUDE).ok();
            load_toolchain(env_lib.as_deref(), env_include.as_deref(), &wheel_dir())
        })
        .as_ref()
        .map_err(Clone::clone)
}

fn unavailable(why: impl Into<String>) -> NvrtcError {
    NvrtcError::Unavailable {
        why: why.into(),
        suggestion: INSTALL_SUGGESTION.to_string(),
    }
}

/// Chooses the libnvrtc to load: `env_lib` (which must exist), else `<wheels>/lib/libnvrtc.so.13`
/// when present, else the system's.
pub fn choose_library(env_lib: Option<&str>, wheels: &Path) -> Result<LibChoice, NvrtcError> {
    if let Some(p) = env_lib.filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(LibChoice::Path(p))
        } else {
            Err(unavailable(format!(
                "{ENV_NVRTC_LIB}={} is not a file",
                p.display()
            )))
        };
    }
    let wheel_lib = wheels.join("lib").join("libnvrtc.so.13");
    if wheel_lib.is_file() {
        Ok(LibChoice::Path(wheel_lib))
    } else {
        Ok(LibChoice::System)
    }
}

/// Chooses the include directory (the first holding `cuda_fp16.h`): `env_include` (which must
/// hold it), `include/` beside the library's directory, `<wheels>/include`, `$CUDA_HOME/include`,
/// `/usr/local/cuda/include`.
pub fn choose_include_dir(
    env_include: Option<&str>,
    lib: &LibChoice,
    wheels: &Path,
) -> Result<PathBuf, NvrtcError> {
    let has_headers = |d: &Path| d.join("cuda_fp16.h").is_file();
    if let Some(d) = env_include.filter(|d| !d.is_empty()) {
        let d = PathBuf::from(d);
        return if has_headers(&d) {
            Ok(d)
        } else {
            Err(unavailable(format!(
                "{ENV_CUDA_INCLUDE}={} holds no cuda_fp16.h",
                d.display()
            )))
        };
    }
    let mut candidates = Vec::new();
    if let LibChoice::Path(p) = lib {
        if let Some(root) = p.parent().and_then(Path::parent) {
            candidates.push(root.join("include"));
        }
    }
    candidates.push(wheels.join("include"));
    if let Ok(home) = std::env::var("CUDA_HOME") {
        candidates.push(PathBuf::from(home).join("include"));
    }
    candidates.push(PathBuf::from("/usr/local/cuda/include"));
    candidates
        .into_iter()
        .find(|d| has_headers(d))
        .ok_or_else(|| {
            unavailable(format!(
                "the CUDA headers (cuda_fp16.h) are not in {}/include, $CUDA_HOME/include or \
             /usr/local/cuda/include, and {ENV_CUDA_INCLUDE} is not set",
                wheels.display()
            ))
        })
}

fn load_toolchain(
    env_lib: Option<&str>,
    env_include: Option<&str>,
    wheels: &Path,
) -> Result<Toolchain, NvrtcError> {
    let choice = choose_library(env_lib, wheels)?;
    let (library, preloaded) = match &choice {
        LibChoice::Path(p) => {
            // SAFETY: loading libnvrtc runs only its initializers; cudarc then finds the mapped
            // library by its soname (dlopen returns the already loaded object).
            let lib = unsafe { libloading::Library::new(p) }
                .map_err(|e| unavailable(format!("{} cannot be loaded: {e}", p.display())))?;
            (p.display().to_string(), Some(lib))
        }
        LibChoice::System => ("system".to_string(), None),
    };
    // SAFETY: only tries to dlopen the candidate names.
    if !unsafe { sys::is_culib_present() } {
        let why = match &choice {
            LibChoice::Path(p) => format!(
                "{} loads, but not under any name cudarc looks for (libnvrtc.so.13, …)",
                p.display()
            ),
            LibChoice::System => format!(
                "libnvrtc was not found: {ENV_NVRTC_LIB} is not set, {} does not exist, and no \
                 system libnvrtc (libnvrtc.so.13, …) is on the loader's path",
                wheels.join("lib").join("libnvrtc.so.13").display()
            ),
        };
        return Err(unavailable(why));
    }
    if let (LibChoice::Path(p), Some(lib)) = (&choice, &preloaded) {
        // cudarc opens libnvrtc by name (`libnvrtc.so` first): make sure that name found the
        // preloaded file, not another libnvrtc on the loader's path.
        let address = |l: &libloading::Library| {
            // SAFETY: looking a symbol up runs nothing.
            unsafe { l.get::<*const std::ffi::c_void>(b"nvrtcVersion") }
                .ok()
                .map(|s| *s)
        };
        // SAFETY: cudarc's library handle; present (checked above).
        let theirs = address(unsafe { sys::culib() });
        if theirs.is_none() || theirs != address(lib) {
            return Err(unavailable(format!(
                "{} is loaded, but cudarc resolved libnvrtc to another library on the loader's \
                 path; remove that one from LD_LIBRARY_PATH, or point {ENV_NVRTC_LIB} at it",
                p.display()
            )));
        }
    }
    let include_dir = choose_include_dir(env_include, &choice, wheels)?;
    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: the library is loaded (checked above); the pointers are valid for writes.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| api("nvrtcVersion", e))?;
    if major < 12 {
        return Err(unavailable(format!(
            "{library} is NVRTC {major}.{minor}; sm_90a needs NVRTC 12 or newer"
        )));
    }
    Ok(Toolchain {
        library,
        include_dir,
        version: (major, minor),
        _preloaded: preloaded,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_and_include_choice() {
        let dir = tempfile::tempdir().expect("temp dir");
        let wheels = dir.path().join("cu13");
        // Nothing installed: the system's library; no headers anywhere under the wheels.
        assert_eq!(choose_library(None, &wheels), Ok(LibChoice::System));
        let missing = dir.path().join("nope.so");
        let err = choose_library(missing.to_str(), &wheels).expect_err("missing file");
        assert!(
            matches!(&err, NvrtcError::Unavailable { suggestion, .. } if suggestion == INSTALL_SUGGESTION),
            "{err}"
        );
        assert!(err
            .to_string()
            .contains("run scripts/install-cuda-wheels.sh"));
        // Installed wheels: their library and headers.
        std::fs::create_dir_all(wheels.join("lib")).expect("mkdir");
        std::fs::create_dir_all(wheels.join("include")).expect("mkdir");
        let lib = wheels.join("lib").join("libnvrtc.so.13");
        std::fs::write(&lib, b"").expect("write");
        std::fs::write(wheels.join("include").join("cuda_fp16.h"), b"").expect("write");
        let choice = choose_library(None, &wheels).expect("wheel library");
        assert_eq!(choice, LibChoice::Path(lib));
        assert_eq!(
            choose_include_dir(None, &choice, &wheels).expect("headers"),
            wheels.join("include")
        );
        let err = choose_include_dir(dir.path().to_str(), &choice, &wheels).expect_err("no h");
        assert!(err.to_string().contains(ENV_CUDA_INCLUDE), "{err}");
    }
}
