//! A minimal, allocation-light class-file reader for analysis: constant pool,
//! class header, methods with their `Code` bytes, and `BootstrapMethods`.
//!
//! It reads only what analysis needs and never trusts a length or an index:
//! every read is bounds-checked and every failure is an [`Error::Malformed`]
//! naming where the class file went wrong.

use std::borrow::Cow;

use crate::Error;
use crate::vocab::reader::Reader;
use crate::vocab::tag;

/// One constant-pool entry, as far as analysis cares.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Entry<'a> {
    /// Index 0 and the second slot of a long/double.
    Unusable,
    Utf8(&'a [u8]),
    Class(u16),
    /// Fieldref, Methodref, InterfaceMethodref: tag, class, name-and-type.
    MemberRef(u8, u16, u16),
    NameAndType(u16, u16),
    MethodHandle(u8, u16),
    /// Dynamic or InvokeDynamic: tag, bootstrap index.
    Dynamic(u8, u16),
    /// Integer, Float, Long, Double, String, MethodType, Module, Package.
    Other(u8),
}

/// The constant pool, indexed from 1.
pub(crate) struct ConstantPool<'a> {
    entries: Vec<Entry<'a>>,
}

impl<'a> ConstantPool<'a> {
    fn parse(c: &mut Reader<'a>) -> Result<Self, Error> {
        let count = c.u16("constant_pool_count")? as usize;
        if count == 0 {
            return Err(Error::Malformed("constant_pool_count is 0".into()));
        }
        let mut entries = Vec::with_capacity(count);
        entries.push(Entry::Unusable);
        while entries.len() < count {
            let index = entries.len();
            let tag = c.u8("constant tag")?;
            let entry = match tag {
                tag::UTF8 => {
                    let len = c.u16("Utf8 length")? as usize;
                    Entry::Utf8(c.bytes(len, "Utf8 bytes")?)
                }
                tag::INTEGER | tag::FLOAT => {
                    c.bytes(4, "4-byte constant")?;
                    Entry::Other(tag)
                }
                tag::LONG | tag::DOUBLE => {
                    c.bytes(8, "8-byte constant")?;
                    if index + 1 >= count {
                        return Err(Error::Malformed(format!(
                            "8-byte constant at #{index} overruns the constant pool"
                        )));
                    }
                    entries.push(Entry::Other(tag));
                    Entry::Unusable
                }
                tag::CLASS => Entry::Class(c.u16("Class name index")?),
                tag::STRING | tag::METHOD_TYPE | tag::MODULE | tag::PACKAGE => {
                    c.u16("constant index")?;
                    Entry::Other(tag)
                }
                tag::FIELDREF..=tag::INTERFACE_METHODREF => {
                    Entry::MemberRef(tag, c.u16("member class")?, c.u16("member name-and-type")?)
                }
                tag::NAME_AND_TYPE => {
                    Entry::NameAndType(c.u16("name index")?, c.u16("descriptor index")?)
                }
                tag::METHOD_HANDLE => {
                    Entry::MethodHandle(c.u8("reference kind")?, c.u16("reference index")?)
                }
                tag::DYNAMIC | tag::INVOKE_DYNAMIC => {
                    let bootstrap = c.u16("bootstrap index")?;
                    c.u16("name-and-type")?;
                    Entry::Dynamic(tag, bootstrap)
                }
                _ => {
                    return Err(Error::Malformed(format!(
                        "unknown constant tag {tag} at #{index} (byte {})",
                        c.pos() - 1
                    )));
                }
            };
            entries.push(entry);
        }
        Ok(Self { entries })
    }

    pub(crate) fn get(&self, index: u16) -> Result<Entry<'a>, Error> {
        match self.entries.get(index as usize) {
            Some(Entry::Unusable) | None => Err(Error::Malformed(format!(
                "invalid constant-pool index #{index} (pool has {} slots)",
                self.entries.len()
            ))),
            Some(e) => Ok(*e),
        }
    }

    pub(crate) fn utf8(&self, index: u16) -> Result<Cow<'a, str>, Error> {
        match self.get(index)? {
            Entry::Utf8(bytes) => ristretto_classfile::mutf8::from_bytes_cow(bytes).map_err(|e| {
                Error::Malformed(format!("constant #{index}: bad modified UTF-8: {e}"))
            }),
            other => Err(wrong_kind(index, "Utf8", other)),
        }
    }

    pub(crate) fn class_name(&self, index: u16) -> Result<Cow<'a, str>, Error> {
        match self.get(index)? {
            Entry::Class(name) => self.utf8(name),
            other => Err(wrong_kind(index, "Class", other)),
        }
    }

    pub(crate) fn name_and_type(&self, index: u16) -> Result<(Cow<'a, str>, Cow<'a, str>), Error> {
        match self.get(index)? {
            Entry::NameAndType(n, d) => Ok((self.utf8(n)?, self.utf8(d)?)),
            other => Err(wrong_kind(index, "NameAndType", other)),
        }
    }

    /// A Fieldref/Methodref/InterfaceMethodref: (tag, owner, name, descriptor).
    pub(crate) fn member(&self, index: u16) -> Result<(u8, Member), Error> {
        match self.get(index)? {
            Entry::MemberRef(tag, class, nat) => {
                let (name, descriptor) = self.name_and_type(nat)?;
                Ok((
                    tag,
                    Member {
                        owner: self.class_name(class)?.into_owned(),
                        name: name.into_owned(),
                        descriptor: descriptor.into_owned(),
                    },
                ))
            }
            other => Err(wrong_kind(index, "Methodref", other)),
        }
    }
}

/// The owner, name and descriptor of a member reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Member {
    pub(crate) owner: String,
    pub(crate) name: String,
    pub(crate) descriptor: String,
}

fn wrong_kind(index: u16, expected: &str, found: Entry<'_>) -> Error {
    let found = match found {
        Entry::Unusable => "unusable slot".to_string(),
        Entry::Utf8(_) => "Utf8".into(),
        Entry::Class(_) => "Class".into(),
        Entry::MemberRef(tag, ..) => format!("member reference (tag {tag})"),
        Entry::NameAndType(..) => "NameAndType".into(),
        Entry::MethodHandle(..) => "MethodHandle".into(),
        Entry::Dynamic(tag, ..) => format!("dynamic constant (tag {tag})"),
        Entry::Other(tag) => format!("constant with tag {tag}"),
    };
    Error::Malformed(format!(
        "constant #{index} should be {expected} but is {found}"
    ))
}

/// A method as read from the class file.
pub(crate) struct RawMethod<'a> {
    pub(crate) access: u16,
    pub(crate) name: u16,
    pub(crate) descriptor: u16,
    /// The bytecode of the `Code` attribute, if any.
    pub(crate) code: Option<&'a [u8]>,
}

/// A `BootstrapMethods` entry: the bootstrap method handle and its arguments.
pub(crate) struct Bootstrap {
    pub(crate) method: u16,
    pub(crate) args: Vec<u16>,
}

/// The parts of a class file analysis needs.
pub(crate) struct RawClass<'a> {
    pub(crate) major: u16,
    pub(crate) access: u16,
    pub(crate) this_class: u16,
    pub(crate) super_class: u16,
    pub(crate) interfaces: Vec<u16>,
    pub(crate) pool: ConstantPool<'a>,
    pub(crate) methods: Vec<RawMethod<'a>>,
    pub(crate) bootstraps: Vec<Bootstrap>,
}

impl<'a> RawClass<'a> {
    pub(crate) fn parse(bytes: &'a [u8]) -> Result<Self, Error> {
        let mut c = Reader::new(bytes);
        let magic = c.u32("magic")?;
        if magic != 0xCAFE_BABE {
            return Err(Error::Malformed(format!(
                "bad magic 0x{magic:08X}, expected 0xCAFEBABE"
            )));
        }
        let _minor = c.u16("minor_version")?;
        let major = c.u16("major_version")?;
        if !(45..=255).contains(&major) {
            return Err(Error::Unsupported(format!(
                "class file major version {major}"
            )));
        }
        let pool = ConstantPool::parse(&mut c)?;
        let access = c.u16("access_flags")?;
        let this_class = c.u16("this_class")?;
        let super_class = c.u16("super_class")?;
        let n = c.u16("interfaces_count")?;
        let mut interfaces = Vec::with_capacity(n as usize);
        for _ in 0..n {
            interfaces.push(c.u16("interface index")?);
        }
        let fields = c.u16("fields_count")?;
        for _ in 0..fields {
            c.bytes(6, "field header")?;
            skip_attributes(&mut c)?;
        }
        let n = c.u16("methods_count")?;
        let mut methods = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let access = c.u16("method access_flags")?;
            let name = c.u16("method name index")?;
            let descriptor = c.u16("method descriptor index")?;
            let mut code = None;
            let attrs = c.u16("method attributes_count")?;
            for _ in 0..attrs {
                let attr_name = c.u16("attribute name index")?;
                let len = c.u32("attribute length")? as usize;
                let body = c.bytes(len, "attribute body")?;
                if code.is_none() && is_utf8(&pool, attr_name, b"Code") {
                    code = Some(code_bytes(body)?);
                }
            }
            methods.push(RawMethod {
                access,
                name,
                descriptor,
                code,
            });
        }
        let mut bootstraps = Vec::new();
        let attrs = c.u16("class attributes_count")?;
        for _ in 0..attrs {
            let attr_name = c.u16("attribute name index")?;
            let len = c.u32("attribute length")? as usize;
            let body = c.bytes(len, "attribute body")?;
            if is_utf8(&pool, attr_name, b"BootstrapMethods") {
                bootstraps = parse_bootstraps(body)?;
            }
        }
        if c.remaining() != 0 {
            return Err(Error::Malformed(format!(
                "{} extra bytes after the end of the class file",
                c.remaining()
            )));
        }
        Ok(Self {
            major,
            access,
            this_class,
            super_class,
            interfaces,
            pool,
            methods,
            bootstraps,
        })
    }
}

fn is_utf8(pool: &ConstantPool<'_>, index: u16, expected: &[u8]) -> bool {
    matches!(pool.get(index), Ok(Entry::Utf8(b)) if b == expected)
}

fn skip_attributes(c: &mut Reader<'_>) -> Result<(), Error> {
    let n = c.u16("attributes_count")?;
    for _ in 0..n {
        c.u16("attribute name index")?;
        let len = c.u32("attribute length")? as usize;
        c.bytes(len, "attribute body")?;
    }
    Ok(())
}

/// The bytecode array inside a `Code` attribute body.
fn code_bytes(body: &[u8]) -> Result<&[u8], Error> {
    let mut c = Reader::new(body);
    c.bytes(4, "Code max_stack/max_locals")?;
    let len = c.u32("code_length")? as usize;
    let code = c.bytes(len, "Code bytes")?;
    let handlers = c.u16("exception_table_length")? as usize;
    c.bytes(handlers * 8, "exception table")?;
    skip_attributes(&mut c)?;
    if c.remaining() != 0 {
        return Err(Error::Malformed(
            "Code attribute length does not match its contents".into(),
        ));
    }
    Ok(code)
}

fn parse_bootstraps(body: &[u8]) -> Result<Vec<Bootstrap>, Error> {
    let mut c = Reader::new(body);
    let n = c.u16("num_bootstrap_methods")?;
    let mut out = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let method = c.u16("bootstrap_method_ref")?;
        let nargs = c.u16("num_bootstrap_arguments")?;
        let mut args = Vec::with_capacity(nargs as usize);
        for _ in 0..nargs {
            args.push(c.u16("bootstrap argument")?);
        }
        out.push(Bootstrap { method, args });
    }
    Ok(out)
}
