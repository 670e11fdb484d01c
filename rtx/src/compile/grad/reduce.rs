//! The reductions of [`StaticOps`](super::StaticOps), written once by a macro: each runs the
//! tensor method of the same name on its input without history and hands the output's
//! gradient back through `reduce_back`, the function the tape's rule for that reduction calls,
//! so the two backwards agree bit for bit.

/// Trait methods for reductions. Three forms: along axis `I` (`axis`, removing or keeping
/// it), along axis `I` with a `correction` (`corrected`: variance and standard deviation),
/// and over every element (`all`).
macro_rules! reductions {
    (axis $bound:ident: $($(#[$doc:meta])* $name:ident -> $out:ident, $kind:ident;)*) => {$(
        $(#[$doc])*
        #[track_caller]
        #[allow(clippy::type_complexity)]
        fn $name<const I: usize>(
            &self,
        ) -> (
            Tensor<$out<S, I>, E>,
            impl FnOnce(&Tensor<$out<S, I>, E>, [bool; 1]) -> Option<Tensor<S, E>>
            + use<Self, S, E, I>,
        )
        where
            E: $bound,
            S: ReduceAxis<I>,
        {
            let x = self.tensor().detach();
            let y = x.$name::<I>();
            let saved = y.clone();
            (y, move |dy: &Tensor<$out<S, I>, E>, [need]: [bool; 1]| {
                wants::<E>(need).then(|| ok(reduce_back(ReduceGrad::$kind, &x, &saved, dy, Some(I))))
            })
        }
    )*};
    (corrected: $($(#[$doc:meta])* $name:ident -> $out:ident, $kind:ident;)*) => {$(
        $(#[$doc])*
        #[track_caller]
        #[allow(clippy::type_complexity)]
        fn $name<const I: usize>(
            &self,
            correction: usize,
        ) -> (
            Tensor<$out<S, I>, E>,
            impl FnOnce(&Tensor<$out<S, I>, E>, [bool; 1]) -> Option<Tensor<S, E>>
            + use<Self, S, E, I>,
        )
        where
            E: Float,
            S: ReduceAxis<I>,
        {
            let x = self.tensor().detach();
            let y = x.$name::<I>(correction);
            let saved = y.clone();
            (y, move |dy: &Tensor<$out<S, I>, E>, [need]: [bool; 1]| {
                let kind = ReduceGrad::$kind(correction);
                wants::<E>(need).then(|| ok(reduce_back(kind, &x, &saved, dy, Some(I))))
            })
        }
    )*};
    (all $bound:ident: $($(#[$doc:meta])* $name:ident, $kind:ident;)*) => {$(
        $(#[$doc])*
        #[track_caller]
        #[allow(clippy::type_complexity)]
        fn $name(
            &self,
        ) -> (
            Tensor<(), E>,
            impl FnOnce(&Tensor<(), E>, [bool; 1]) -> Option<Tensor<S, E>> + use<Self, S, E>,
        )
        where
            E: $bound,
        {
            let x = self.tensor().detach();
            let y = x.$name();
            let saved = y.clone();
            (y, move |dy: &Tensor<(), E>, [need]: [bool; 1]| {
                wants::<E>(need).then(|| ok(reduce_back(ReduceGrad::$kind, &x, &saved, dy, None)))
            })
        }
    )*};
}

pub(super) use reductions;

/// Expands to the reductions, softmax and log-softmax of [`StaticOps`](super::StaticOps),
/// inside its declaration in `mod.rs`, where the names they use are imported. (rustfmt does
/// not format macro bodies: keep this one in rustfmt's style by hand.)
macro_rules! reduce_methods {
    () => {
        reductions! { axis Num:
            /// [`Tensor::sum`] with its backward: the gradient repeated along axis `I`.
            sum -> Reduced, Sum;
            /// [`Tensor::sum_keepdim`] with its backward.
            sum_keepdim -> Kept, Sum;
            /// [`Tensor::prod`] with its backward (exact where elements are zero).
            prod -> Reduced, Prod;
            /// [`Tensor::prod_keepdim`] with its backward.
            prod_keepdim -> Kept, Prod;
            /// [`Tensor::max`] with its backward: to the maxima, split evenly among ties.
            max -> Reduced, Extreme;
            /// [`Tensor::max_keepdim`] with its backward.
            max_keepdim -> Kept, Extreme;
            /// [`Tensor::min`] with its backward: to the minima, split evenly among ties.
            min -> Reduced, Extreme;
            /// [`Tensor::min_keepdim`] with its backward.
            min_keepdim -> Kept, Extreme;
        }

        reductions! { axis Float:
            /// [`Tensor::mean`] with its backward: the gradient repeated along axis `I` and divided
            /// by its size.
            ///
            /// ```
            /// use rtx::prelude::*;
            /// use rtx::compile::grad::StaticOps;
            /// let x: Tensor<Rank2<2, 2>> =
            ///     Tensor::from_array([[1.0, 3.0], [5.0, 7.0]], Device::Cpu);
            /// let (y, backward) = StaticOps::mean::<1>(&x);
            /// assert_eq!(y.to_vec(), vec![2.0, 6.0]);
            /// assert_eq!(backward(&y.ones_like(), [true]).unwrap().to_vec(), vec![0.5; 4]);
            /// ```
            mean -> Reduced, Mean;
            /// [`Tensor::mean_keepdim`] with its backward.
            mean_keepdim -> Kept, Mean;
            /// [`Tensor::logsumexp`] with its backward: the gradient weighted by the softmax.
            logsumexp -> Reduced, LogSumExp;
            /// [`Tensor::logsumexp_keepdim`] with its backward.
            logsumexp_keepdim -> Kept, LogSumExp;
        }

        reductions! { corrected:
            /// [`Tensor::var`] with its backward.
            var -> Reduced, Var;
            /// [`Tensor::var_keepdim`] with its backward.
            var_keepdim -> Kept, Var;
            /// [`Tensor::std`] with its backward.
            std -> Reduced, Std;
            /// [`Tensor::std_keepdim`] with its backward.
            std_keepdim -> Kept, Std;
        }

        reductions! { all Num:
            /// [`Tensor::sum_all`] with its backward: the scalar gradient repeated everywhere.
            ///
            /// ```
            /// use rtx::prelude::*;
            /// use rtx::compile::grad::StaticOps;
            /// let x: Tensor<Rank1<3>> = Tensor::from_array([1.0, 2.0, 3.0], Device::Cpu);
            /// let (y, backward) = StaticOps::sum_all(&x);
            /// assert_eq!(y.item(), 6.0);
            /// assert_eq!(backward(&y.ones_like(), [true]).unwrap().to_vec(), vec![1.0; 3]);
            /// ```
            sum_all, Sum;
            /// [`Tensor::prod_all`] with its backward.
            prod_all, Prod;
            /// [`Tensor::max_all`] with its backward.
            max_all, Extreme;
            /// [`Tensor::min_all`] with its backward.
            min_all, Extreme;
        }

        reductions! { all Float:
            /// [`Tensor::mean_all`] with its backward.
            mean_all, Mean;
        }

        /// [`Tensor::softmax`] with its backward, `y (g - Σ g y)` along axis `I`.
        ///
        /// ```
        /// use rtx::prelude::*;
        /// use rtx::compile::grad::StaticOps;
        /// let x: Tensor<Rank2<1, 2>> = Tensor::from_array([[0.0, 0.0]], Device::Cpu);
        /// let (y, backward) = StaticOps::softmax::<1>(&x);
        /// assert_eq!(y.to_vec(), vec![0.5, 0.5]);
        /// let g: Tensor<Rank2<1, 2>> = Tensor::from_array([[1.0, 0.0]], Device::Cpu);
        /// assert_eq!(backward(&g, [true]).unwrap().to_vec(), vec![0.25, -0.25]);
        /// ```
        #[allow(clippy::type_complexity)]
        fn softmax<const I: usize>(
            &self,
        ) -> (
            Tensor<S, E>,
            impl FnOnce(&Tensor<S, E>, [bool; 1]) -> Option<Tensor<S, E>> + use<Self, S, E, I>,
        )
        where
            E: Float,
            S: ReduceAxis<I>,
        {
            let y = self.tensor().detach().softmax::<I>();
            let saved = y.clone();
            (y, move |dy: &Tensor<S, E>, [need]: [bool; 1]| {
                need.then(|| ok(softmax_back(&saved, dy, I, false)))
            })
        }

        /// [`Tensor::log_softmax`] with its backward, `g - softmax Σ g` along axis `I`.
        #[allow(clippy::type_complexity)]
        fn log_softmax<const I: usize>(
            &self,
        ) -> (
            Tensor<S, E>,
            impl FnOnce(&Tensor<S, E>, [bool; 1]) -> Option<Tensor<S, E>> + use<Self, S, E, I>,
        )
        where
            E: Float,
            S: ReduceAxis<I>,
        {
            let y = self.tensor().detach().log_softmax::<I>();
            let saved = y.clone();
            (y, move |dy: &Tensor<S, E>, [need]: [bool; 1]| {
                need.then(|| ok(softmax_back(&saved, dy, I, true)))
            })
        }
    };
}

pub(super) use reduce_methods;
