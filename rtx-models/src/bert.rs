//! The BERT family of encoders (BERT, MiniLM, ...): token, position and segment embeddings,
//! then `L` post-norm transformer layers with bidirectional attention over the unpadded
//! tokens, loaded from Hugging Face `BertModel` checkpoints.
//!
//! The sizes are types, as everywhere in rtx: `Bert<V, P, D, FF, H, L>` has a vocabulary of
//! `V`, `P` positions, width `D`, feed-forward width `FF`, `H` heads and `L` layers, so a
//! checkpoint of another size is an error when it loads (naming the tensor and both shapes),
//! and [`BertConfig::check`] compares a `config.json` with the type before anything is read.
//!
//! The forward is eager (each op launches as it runs): `#[model]`'s compiled forwards take
//! static dims, and sentence batches have a length known only at run time.

use rtx::io::{HfCheckpoint, KeyMap};
use rtx::nn::Init;
use rtx::op::UnaryOp;
use rtx::prelude::*;
use std::path::Path;

/// BERT's embeddings: the sum of a token's word, position and segment vectors, normalized.
#[model]
pub struct BertEmbeddings<const V: usize, const P: usize, const D: usize, E: Float = f32> {
    /// Word vectors, `[V, D]`.
    pub word: Embedding<V, D, E>,
    /// Learned absolute position vectors, `[P, D]`.
    pub position: Embedding<P, D, E>,
    /// Segment ("token type") vectors, `[2, D]`; single-segment input uses row 0.
    pub token_type: Embedding<2, D, E>,
    /// The layer norm after the sum.
    pub norm: LayerNorm<D, E>,
}

// ANCHOR: layer
/// One encoder layer: self-attention and a GELU feed-forward block, each added to its input
/// and then layer-normalized (BERT's post-norm order).
#[model]
pub struct BertLayer<const D: usize, const FF: usize, const H: usize, E: Float = f32> {
    /// Query projection.
    pub query: Linear<D, D, E>,
    /// Key projection.
    pub key: Linear<D, D, E>,
    /// Value projection.
    pub value: Linear<D, D, E>,
    /// Output projection of the attention block.
    pub attn_out: Linear<D, D, E>,
    /// Layer norm after the attention block's residual sum.
    pub attn_norm: LayerNorm<D, E>,
    /// Feed-forward expansion, `D -> FF`.
    pub ff_in: Linear<D, FF, E>,
    /// Feed-forward contraction, `FF -> D`.
    pub ff_out: Linear<FF, D, E>,
    /// Layer norm after the feed-forward block's residual sum.
    pub ff_norm: LayerNorm<D, E>,
}
// ANCHOR_END: layer

/// A BERT encoder: embeddings and `L` layers (no pooler: sentence encoders pool the tokens).
#[model]
pub struct Bert<
    const V: usize,
    const P: usize,
    const D: usize,
    const FF: usize,
    const H: usize,
    const L: usize,
    E: Float = f32,
> {
    /// Token, position and segment embeddings.
    pub embeddings: BertEmbeddings<V, P, D, E>,
    /// The encoder layers, in order.
    pub layers: [BertLayer<D, FF, H, E>; L],
}

/// all-MiniLM-L6-v2's encoder: vocabulary 30522, 512 positions, width 384, feed-forward 1536,
/// 12 heads, 6 layers.
pub type MiniLmL6<E = f32> = Bert<30522, 512, 384, 1536, 12, 6, E>;

/// Token ids and their attention mask, `[B, T]` each: 1 for a real token, 0 for padding.
pub type Ids<B, T> = Tensor<(B, T), i64>;

/// Where attention must not look, `[B, T]`: true where the key is padding.
pub type Padding = Tensor<(usize, usize), bool>;

impl<
    const V: usize,
    const P: usize,
    const D: usize,
    const FF: usize,
    const H: usize,
    const L: usize,
    E: Float,
> Bert<V, P, D, FF, H, L, E>
{
    /// The names Hugging Face's `BertModel` gives this model's tensors, as a [`KeyMap`] from
    /// theirs to rtx's; the pooler, which mean-pooling encoders do not use, and the
    /// `position_ids` buffer are left out.
    pub fn hf_key_map() -> KeyMap {
        // ANCHOR: key_map
        KeyMap::new()
            .ignore("pooler")
            .ignore("embeddings.position_ids")
            .rename("embeddings.word_embeddings", "embeddings.word")
            .rename("embeddings.position_embeddings", "embeddings.position")
            .rename("embeddings.token_type_embeddings", "embeddings.token_type")
            .rename("embeddings.LayerNorm", "embeddings.norm")
            .rename("encoder.layer.*.attention.self.query", "layers.*.query")
            .rename("encoder.layer.*.attention.self.key", "layers.*.key")
            .rename("encoder.layer.*.attention.self.value", "layers.*.value")
            .rename(
                "encoder.layer.*.attention.output.dense",
                "layers.*.attn_out",
            )
            .rename(
                "encoder.layer.*.attention.output.LayerNorm",
                "layers.*.attn_norm",
            )
            .rename("encoder.layer.*.intermediate.dense", "layers.*.ff_in")
            .rename("encoder.layer.*.output.dense", "layers.*.ff_out")
            .rename("encoder.layer.*.output.LayerNorm", "layers.*.ff_norm")
        // ANCHOR_END: key_map
    }

    /// Loads a Hugging Face BERT checkpoint directory (`config.json` and `model.safetensors`,
    /// or a sharded one) onto `device`, casting its weights to `E`. The config must describe
    /// this type, and the checkpoint must hold exactly its tensors.
    pub fn from_pretrained(dir: impl AsRef<Path>, device: Device) -> Result<Self> {
        let dir = dir.as_ref();
        let config = BertConfig::read(&dir.join("config.json"))?;
        config.check::<V, P, D, FF, H, L>(&dir.join("config.json"))?;
        let mut model = Self::init(&device, 0);
        HfCheckpoint::open(dir)?.load_model(&mut model, &Self::hf_key_map())?;
        model.set_eps(config.layer_norm_eps);
        Ok(model)
    }

    /// Sets every layer norm's epsilon (BERT uses 1e-12, not PyTorch's default 1e-5).
    pub fn set_eps(&mut self, eps: f64) {
        self.embeddings.norm.eps = eps;
        for layer in &mut self.layers {
            layer.attn_norm.eps = eps;
            layer.ff_norm.eps = eps;
        }
    }

    /// The last layer's hidden states, `[B, T, D]`, for token ids and, when the batch is
    /// padded, its attention mask (`[B, T]`, 1 for tokens and 0 for padding; padded keys get
    /// no attention). `None` means every token is real, which spares the masking (as
    /// transformers drops an all-ones mask).
    ///
    /// # Panics
    /// When `T` exceeds the `P` positions, or a token id is not below `V`.
    #[track_caller]
    pub fn forward<B: Dim, T: Dim>(
        &self,
        ids: &Ids<B, T>,
        mask: Option<&Ids<B, T>>,
    ) -> Tensor<(B, T, Const<D>), E> {
        let (b, t) = (ids.dims()[0], ids.dims()[1]);
        assert!(
            t <= P,
            "BERT forward: {t} tokens, but the model has only {P} positions"
        );
        let padding = mask.map(|m| m.eq(0).reshape((b, t)));
        let mut x = self.embeddings.forward(&ids.reshape((b, t)));
        for layer in &self.layers {
            x = layer.forward(&x, padding.as_ref());
        }
        x.reshape((ids.dim::<0>(), ids.dim::<1>(), Const::<D>))
    }
}

impl<const V: usize, const P: usize, const D: usize, E: Float> BertEmbeddings<V, P, D, E> {
    /// `[B, T]` ids to `[B, T, D]`: word + position + segment 0, layer-normalized.
    #[track_caller]
    pub fn forward<B: Dim, T: Dim>(&self, ids: &Ids<B, T>) -> Tensor<(B, T, Const<D>), E> {
        let (b, t) = (ids.dims()[0], ids.dims()[1]);
        // Run-time dims inside: same-shape sums of generic dims have no broadcast rule.
        let shape = (b, t, Const::<D>);
        let words = self.word.forward_seq(&ids.reshape((b, t)));
        let positions = self.position.weight.narrow::<0, usize>(0, t);
        let segment = self.token_type.weight.narrow::<0, usize>(0, 1);
        let x = words + positions.broadcast_to(shape) + segment.broadcast_to(shape);
        self.norm
            .forward(&x)
            .reshape((ids.dim::<0>(), ids.dim::<1>(), Const::<D>))
    }
}

impl<const D: usize, const FF: usize, const H: usize, E: Float> BertLayer<D, FF, H, E> {
    /// One layer over `[B, T, D]`; `padding`, when the batch has any, is `[B, T]`, true
    /// where the key is padding.
    #[track_caller]
    pub fn forward(
        &self,
        x: &Tensor<(usize, usize, Const<D>), E>,
        padding: Option<&Padding>,
    ) -> Tensor<(usize, usize, Const<D>), E> {
        let (b, t) = (x.dims()[0], x.dims()[1]);
        let hd = D / H;
        let heads = |y: Tensor<(usize, usize, Const<D>), E>| {
            y.reshape((b, t, H, hd)).permute::<Axes4<0, 2, 1, 3>>()
        };
        let (q, k, v) = (
            heads(self.query.forward(x)),
            heads(self.key.forward(x)),
            heads(self.value.forward(x)),
        );
        let y = q
            .attention(&k, &v, padding, 1.0 / (hd as f64).sqrt())
            .permute::<Axes4<0, 2, 1, 3>>()
            .reshape((b, t, Const::<D>));
        let x = self.attn_norm.forward(&(self.attn_out.forward(&y) + x));
        let h = self.ff_in.forward_act(&x, UnaryOp::Gelu);
        self.ff_norm.forward(&(self.ff_out.forward(&h) + &x))
    }
}

/// The fields of a Hugging Face BERT `config.json` that fix the model's shape.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct BertConfig {
    /// `V`.
    pub vocab_size: usize,
    /// `P`.
    pub max_position_embeddings: usize,
    /// `D`.
    pub hidden_size: usize,
    /// `FF`.
    pub intermediate_size: usize,
    /// `H`.
    pub num_attention_heads: usize,
    /// `L`.
    pub num_hidden_layers: usize,
    /// The layer norms' epsilon.
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    /// The feed-forward activation; only `gelu` (the exact, erf form) is supported.
    #[serde(default = "default_act")]
    pub hidden_act: String,
    /// The number of segment types; only 2 is supported.
    #[serde(default = "default_types")]
    pub type_vocab_size: usize,
}

fn default_eps() -> f64 {
    1e-12
}
fn default_act() -> String {
    "gelu".into()
}
fn default_types() -> usize {
    2
}

impl BertConfig {
    /// Reads a `config.json`; errors name the file.
    pub fn read(path: &Path) -> Result<Self> {
        serde_json::from_value(crate::pretrained::read_json(path)?).map_err(|e| Error::Data {
            path: path.display().to_string(),
            msg: format!("not a BERT config.json: {e}"),
        })
    }

    /// Whether this config describes `Bert<V, P, D, FF, H, L>`; the error lists every field
    /// that differs, with the file's value and the type's.
    pub fn check<
        const V: usize,
        const P: usize,
        const D: usize,
        const FF: usize,
        const H: usize,
        const L: usize,
    >(
        &self,
        path: &Path,
    ) -> Result<()> {
        let fields = [
            ("vocab_size", self.vocab_size, V),
            ("max_position_embeddings", self.max_position_embeddings, P),
            ("hidden_size", self.hidden_size, D),
            ("intermediate_size", self.intermediate_size, FF),
            ("num_attention_heads", self.num_attention_heads, H),
            ("num_hidden_layers", self.num_hidden_layers, L),
            ("type_vocab_size", self.type_vocab_size, 2),
        ];
        let mut wrong: Vec<String> = fields
            .iter()
            .filter(|(_, file, ty)| file != ty)
            .map(|(name, file, ty)| {
                format!("{name} is {file} in the file but {ty} in the model type")
            })
            .collect();
        if self.hidden_act != "gelu" {
            wrong.push(format!(
                "hidden_act is `{}`, but only `gelu` (the erf form) is supported",
                self.hidden_act
            ));
        }
        if wrong.is_empty() {
            return Ok(());
        }
        Err(Error::Data {
            path: path.display().to_string(),
            msg: format!("does not describe this model: {}", wrong.join("; ")),
        })
    }
}

/// Mean pooling as sentence-transformers does it: the average of the token vectors over the
/// real tokens (mask 1), `[B, T, D] -> [B, D]`.
#[track_caller]
pub fn mean_pool<B: Dim, T: Dim, const D: usize, E: Float>(
    hidden: &Tensor<(B, T, Const<D>), E>,
    mask: &Ids<B, T>,
) -> Tensor<(B, Const<D>), E> {
    let (b, t) = (hidden.dims()[0], hidden.dims()[1]);
    let m = mask.cast::<E>().reshape((b, t, 1usize));
    let h = hidden.reshape((b, t, D));
    let summed = (h * m.broadcast_to((b, t, D))).sum::<1>();
    let counts = m.sum::<1>().clamp(E::from_f64(1e-9), E::from_f64(f64::MAX));
    (summed / counts.broadcast_to((b, D))).reshape((hidden.dim::<0>(), Const::<D>))
}

/// Each row scaled to unit length, as `torch.nn.functional.normalize` (lengths below 1e-12
/// are taken as 1e-12).
#[track_caller]
pub fn normalize<B: Dim, const D: usize, E: Float>(
    x: &Tensor<(B, Const<D>), E>,
) -> Tensor<(B, Const<D>), E> {
    let b = x.dims()[0];
    let x2 = x.reshape((b, D));
    let norms = (&x2 * &x2)
        .sum_keepdim::<1>()
        .sqrt()
        .clamp(E::from_f64(1e-12), E::from_f64(f64::MAX));
    (x2 / norms.broadcast_to((b, D))).reshape(x.shape())
}
