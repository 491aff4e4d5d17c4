//! The `#[step]` attribute of the weft guest SDK (`weft-guest`). Use it
//! through `weft_guest::step`; see that crate for the documentation.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Error, FnArg, ItemFn, LitStr, ReturnType, Type, parse_macro_input};

const SIGNATURE: &str = "expected `fn run(ctx: &Context, input: In) -> Result<Out, StepError>` \
     or `fn run(input: In) -> Result<Out, StepError>`";

/// Turn a typed function into the step a weft guest exports.
///
/// Arguments (all optional): `name = ".."` (default: the package name),
/// `description = ".."` (default: the function's doc comment, else the
/// package description), `version = ".."` (default: the package version).
#[proc_macro_attribute]
pub fn step(attr: TokenStream, item: TokenStream) -> TokenStream {
    let mut args = Args::default();
    let parser = syn::meta::parser(|meta| {
        let slot = if meta.path.is_ident("name") {
            &mut args.name
        } else if meta.path.is_ident("description") {
            &mut args.description
        } else if meta.path.is_ident("version") {
            &mut args.version
        } else {
            return Err(meta.error("unknown #[step] argument: expected `name`, `description` or `version`"));
        };
        if slot.is_some() {
            return Err(meta.error("this #[step] argument is given twice"));
        }
        *slot = Some(meta.value()?.parse::<LitStr>()?);
        Ok(())
    });
    parse_macro_input!(attr with parser);
    let func = parse_macro_input!(item as ItemFn);
    expand(args, func).unwrap_or_else(Error::into_compile_error).into()
}

#[derive(Default)]
struct Args {
    name: Option<LitStr>,
    description: Option<LitStr>,
    version: Option<LitStr>,
}

fn expand(args: Args, func: ItemFn) -> syn::Result<TokenStream2> {
    let sig = &func.sig;
    if let Some(token) = &sig.asyncness {
        return Err(Error::new(token.span(), "a step cannot be `async`"));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        return Err(Error::new(sig.generics.span(), "a step cannot be generic: name the input and output types"));
    }
    let mut types = Vec::new();
    for arg in &sig.inputs {
        match arg {
            FnArg::Receiver(r) => return Err(Error::new(r.span(), "a step cannot take `self`")),
            FnArg::Typed(t) => types.push(&*t.ty),
        }
    }
    let (input_ty, takes_ctx) = match types.as_slice() {
        [input] => (*input, false),
        [ctx, input] => {
            if !matches!(ctx, Type::Reference(_)) {
                return Err(Error::new(ctx.span(), "the first argument of a step is the context: `ctx: &Context`"));
            }
            (*input, true)
        }
        _ => {
            let span = if sig.inputs.is_empty() { sig.paren_token.span.join() } else { sig.inputs.span() };
            let found = sig.inputs.len();
            return Err(Error::new(
                span,
                format!(
                    "a step takes the context and the input, or just the input, not {found} arguments: {SIGNATURE}"
                ),
            ));
        }
    };
    let ret_ty = match &sig.output {
        ReturnType::Default => {
            return Err(Error::new(
                sig.ident.span(),
                format!("a step must return `Result<Out, StepError>`: {SIGNATURE}"),
            ));
        }
        ReturnType::Type(_, ty) => &**ty,
    };
    if let Type::ImplTrait(_) = ret_ty {
        return Err(Error::new(ret_ty.span(), "a step must return a named `Result<Out, StepError>`, not `impl Trait`"));
    }

    let name = match args.name {
        Some(lit) => quote!(#lit),
        None => quote!(::core::env!("CARGO_PKG_NAME")),
    };
    let version = match args.version {
        Some(lit) => quote!(#lit),
        None => quote!(::core::env!("CARGO_PKG_VERSION")),
    };
    let description = match (args.description, doc_comment(&func)) {
        (Some(lit), _) => quote!(#lit),
        (None, Some(doc)) => {
            let lit = LitStr::new(&doc, Span::call_site());
            quote!(#lit)
        }
        (None, None) => quote!(::core::env!("CARGO_PKG_DESCRIPTION")),
    };

    let ident = &sig.ident;
    let vis = &func.vis;
    let call = if takes_ctx { quote!(#ident(ctx, input)) } else { quote!({ let _ = ctx; #ident(input) }) };
    // Spans on the user's types make trait-bound errors (a missing
    // `JsonSchema` or `Deserialize` derive) point at the type.
    let input_alias = quote_spanned!(input_ty.span()=> type Input = #input_ty;);
    let output_alias = quote_spanned!(ret_ty.span()=>
        type Output = <#ret_ty as ::weft_guest::IntoStepResult>::Ok;
    );
    Ok(quote! {
        // Only the wasm export glue calls it outside tests.
        #[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
        #func

        /// The step defined with `#[step]`: implements `weft_guest::Step`;
        /// call `WeftStep::call(&ctx, json)` or `WeftStep::metadata()` in tests.
        #[allow(dead_code)]
        #vis struct WeftStep;

        impl ::weft_guest::Step for WeftStep {
            #input_alias
            #output_alias
            const NAME: &'static str = #name;
            const DESCRIPTION: &'static str = #description;
            const VERSION: &'static str = #version;

            fn run(
                ctx: &::weft_guest::Context,
                input: Self::Input,
            ) -> ::core::result::Result<Self::Output, ::weft_guest::StepError> {
                ::weft_guest::IntoStepResult::into_step_result(#call)
            }
        }

        #[cfg(target_arch = "wasm32")]
        ::weft_guest::__private::export!(WeftStep with_types_in ::weft_guest::__private);
    })
}

/// The function's `///` comment, one line per line, or None.
fn doc_comment(func: &ItemFn) -> Option<String> {
    let lines: Vec<String> = func
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        })
        .map(|line| line.strip_prefix(' ').unwrap_or(&line).to_string())
        .collect();
    let doc = lines.join("\n").trim().to_string();
    (!doc.is_empty()).then_some(doc)
}
